"""How a run shows its progress: rich bars on a terminal; plain lines where there is none (CI, `| tee`).

Without a terminal, rich draws its bars only once, at the end, so a 20-minute run would print
nothing for 20 minutes. There each scenario prints a line when it starts, a heartbeat at most
every 30 s while it runs, and a line when it ends with its trials counted by outcome.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from lab.records import host_cpu
HEARTBEAT_S = 30.0


class ScenarioProgress:
    """One scenario's progress, on a rich Progress bar and, without a terminal, as lines."""

    def __init__(self, console, progress, name: str, total: int, estimate: float | None = None,
                 at_once: int = 1, events: int | None = None, announce: bool = True):
        """estimate: the scenario's own guess of its seconds, from its profile's timers and trial counts.
        events: a scenario whose fault is one event for many subjects (scenarios/events.py) counts its events too:
        at_once and the pace are then in events, and each event's subjects advance the bar together.
        announce: print the start line (without a terminal); a caller that says more of its own leaves it out."""
        self.console, self.progress, self.name, self.total = console, progress, name, total
        self.estimate, self.at_once = estimate, max(1, at_once)
        self.events, self.events_done = events, 0
        self.plain = not console.is_terminal
        self.task = progress.add_task(name, total=total, left=self._left(0.0))
        self.done = 0
        self.outcomes: Counter = Counter()
        self.started = self.last_line = time.monotonic()
        if self.plain and announce:
            self._line(f"{name}: {self._count(total, events)}" + (f", about {_duration(estimate)}" if estimate else ""))

    @staticmethod
    def _count(trials: int, events: int | None) -> str:
        """'12 trials', or '3 events, 12 subjects' for a scenario whose trials (its subjects) share fault events."""
        return f"{trials} trials" if events is None else f"{events} events, {trials} subjects"

    def _left(self, elapsed: float) -> str:
        """Time left: the estimate until a first round of trials (or events) has finished, then their observed pace.
        Past the estimate with none of that round done, it says by how much and how many are still to go, never
        "~0 s left" while trials still wait."""
        if self.total == 0:
            return ""
        done, total = getattr(self, "done", 0), self.total
        unit = "trials"
        if getattr(self, "events", None) is not None:
            done, total, unit = self.events_done, self.events or 0, "events"
        if done >= total:
            return ""
        if done >= min(self.at_once, total) and done:
            return f"~{_duration(elapsed / done * (total - done))} left"
        if self.estimate is None:
            return ""
        if elapsed >= self.estimate:
            still = total - done
            return f"{_duration(elapsed - self.estimate)} past its ~{_duration(self.estimate)} estimate, " \
                   f"{still} {unit if still > 1 else unit[:-1]} still to finish"
        return f"~{_duration(max(1.0, self.estimate - elapsed))} left"

    def advance_event(self, records: list[Mapping[str, Any]] | None) -> None:
        """One event finished: each subject's record (None: it was interrupted and none was kept)."""
        self.events_done += 1
        for record in records or []:
            self.advance(record)

    def advance(self, record: Mapping[str, Any] | None) -> None:
        """One trial finished (record None: it was interrupted and not kept)."""
        self.progress.advance(self.task)
        self.done += 1
        if record is not None:
            self.outcomes[record.get("safety") if record["status"] == "ok" else record["status"]] += 1
        self.tick()

    def drop(self, trials: int) -> None:
        """Trials planned but no longer needed (their figures precise enough, or their cells settled by the
        sequential rule): out of the total."""
        if trials:
            self.total -= trials
            self.progress.update(self.task, total=self.total)
            if self.plain:
                self._line(f"{self.name}: settled; {trials} planned trials not needed")

    def tick(self) -> None:
        """Called often while the scenario runs: the time left, and a heartbeat line when the last is 30 s old."""
        elapsed = time.monotonic() - self.started
        self.progress.update(self.task, left=self._left(elapsed))
        if self.plain and time.monotonic() - self.last_line >= HEARTBEAT_S:
            left = self._left(elapsed)
            events = "" if self.events is None else f"{self.events_done}/{self.events} events, "
            unit = "trials" if self.events is None else "subjects"
            self._line(f"{self.name}: {events}{self.done}/{self.total} {unit} after {elapsed:.0f} s"
                       + (f", {left}" if left else ""))

    def finish(self, bound: float | None = None, stolen: float | None = None) -> float:
        """The end line (without a terminal), with wall / bound when the scenario's lower bound is known
        (lab/runner/pacing.py lower_bound) and the CPU the host took meanwhile (lab/records/host_cpu.py); on a terminal the
        bar stays and only wall / bound is printed. Returns the wall."""
        wall = time.monotonic() - self.started
        ratio = "" if bound is None else f"; wall / bound {wall_over_bound(wall, bound)}{host_cpu.describe(stolen)}"
        if self.plain:
            counts = ", ".join(f"{what} {n}" for what, n in sorted(self.outcomes.items(), key=lambda kv: str(kv[0])))
            events = None if self.events is None else self.events_done
            self._line(f"{self.name}: done in {wall:.1f} s, {self._count(self.done, events)}"
                       + (f" ({counts})" if counts else "") + ratio)
        elif ratio:
            self._line(f"{self.name}: {wall:.1f} s{ratio}")
        return wall

    def _line(self, text: str) -> None:
        self.console.print(text, highlight=False, soft_wrap=True)  # one line each, however narrow the console
        self.last_line = time.monotonic()


def wall_over_bound(wall: float, bound: float) -> str:
    """'2.31 (92.4 s / 40.0 s)': how many times its lower bound a scenario or a run took; a bound of 0 (nothing
    it had to wait for) gives no ratio."""
    ratio = f"{wall / bound:.2f}" if bound > 0 else "-"
    return f"{ratio} ({wall:.1f} s / {bound:.1f} s)"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
