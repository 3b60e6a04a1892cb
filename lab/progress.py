"""How a run shows its progress: rich bars on a terminal; plain lines where there is none (CI, `| tee`).

Without a terminal, rich draws its bars only once, at the end, so a 20-minute run would print
nothing for 20 minutes. There each scenario prints a line when it starts, a heartbeat at most
every 30 s while it runs, and a line when it ends with its trials counted by outcome.
"""

from __future__ import annotations

import time
from collections import Counter

HEARTBEAT_S = 30.0


class ScenarioProgress:
    """One scenario's progress, on a rich Progress bar and, without a terminal, as lines."""

    def __init__(self, console, progress, name: str, total: int):
        self.console, self.progress, self.name, self.total = console, progress, name, total
        self.plain = not console.is_terminal
        self.task = progress.add_task(name, total=total)
        self.done = 0
        self.outcomes: Counter = Counter()
        self.started = self.last_line = time.monotonic()
        if self.plain:
            self._line(f"{name}: {total} trials")

    def advance(self, record: dict | None) -> None:
        """One trial finished (record None: it was interrupted and not kept)."""
        self.progress.advance(self.task)
        self.done += 1
        if record is not None:
            self.outcomes[record.get("safety") if record["status"] == "ok" else record["status"]] += 1
        self.tick()

    def tick(self) -> None:
        """Called often while the scenario runs: a heartbeat line when the last line is 30 s old."""
        if self.plain and time.monotonic() - self.last_line >= HEARTBEAT_S:
            self._line(f"{self.name}: {self.done}/{self.total} trials after {time.monotonic() - self.started:.0f} s")

    def finish(self) -> None:
        if self.plain:
            counts = ", ".join(f"{what} {n}" for what, n in sorted(self.outcomes.items(), key=lambda kv: str(kv[0])))
            self._line(f"{self.name}: done in {time.monotonic() - self.started:.1f} s, {self.done} trials"
                       + (f" ({counts})" if counts else ""))

    def _line(self, text: str) -> None:
        self.console.print(text, highlight=False)
        self.last_line = time.monotonic()
