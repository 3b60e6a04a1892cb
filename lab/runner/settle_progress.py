"""How the added trials show their progress: per scenario, the cells left and where each one's bound stands.

A round's start prints one line naming its open cells with their standing (lab/runner/settle_rule.py
Tally.standing: '≤45% (5 of 20 exercised)', '✗ 1/4', '○ 0 of 6 exercised'); the bar (or, without a terminal,
the heartbeat line) carries the cells left and the weakest of them, updated as each trial is kept.
"""

from __future__ import annotations

from lab.runner.progress import ScenarioProgress
from lab.runner.settle_rounds import Ledger
from lab.runner.settle_rule import SettleTarget, Tally

SHOWN_CELLS = 8  # a round's line names at most this many cells, then how many more


def _worst_first(tally: Tally) -> tuple:
    """Cells furthest from their bound first: never exercised, then the fewest exercised; failed ones last."""
    return (bool(tally.failures), tally.exercised, tally.finished)


class SettleProgress(ScenarioProgress):
    """One scenario's added trials over all its rounds: a bar whose total grows by each round's trials."""

    def __init__(self, console, progress, scenario: str, ledger: Ledger, events: bool = False):
        self.ledger = ledger
        self.open: list[SettleTarget] = []  # read by _left, which the bar's first draw calls
        self.scenario, self.rounds = scenario, 0
        super().__init__(console, progress, f"{scenario} +", 0, at_once=1, events=0 if events else None,
                         announce=False)

    def begin_round(self, targets: list[SettleTarget], trials: int, events: int | None = None) -> None:
        """A round starts: its open cells, its trials (and events); one line says where each cell stands."""
        self.rounds += 1
        self.open = list(targets)
        self.total += trials
        if events is not None:
            self.events = (self.events or 0) + events
        self.progress.update(self.task, total=self.total, left=self._left(0.0))
        ranked = sorted(self.open, key=lambda t: _worst_first(self.ledger.tally(t)))
        named = ", ".join(f"{t.backend}{'' if t.variant == '-' else '/' + t.variant} "
                          f"{self.ledger.tally(t).standing()}" for t in ranked[:SHOWN_CELLS])
        more = f", and {len(ranked) - SHOWN_CELLS} more" if len(ranked) > SHOWN_CELLS else ""
        unit = f"{events} events, {trials} subjects" if events is not None else f"{trials} trials"
        self._line(f"{self.scenario}: added round {self.rounds}, {len(self.open)} cells left ({unit}): {named}{more}")

    def drop(self, trials: int) -> None:
        """Queued trials no longer needed (their cells met their rules, or would not end before the deadline): out
        of the total, without a line each; the round's next line and the end line say where the cells stand."""
        if trials:
            self.total -= trials
            self.progress.update(self.task, total=self.total)

    def left_cells(self) -> list[SettleTarget]:
        return [t for t in self.open if self.ledger.ended(t) is None]

    def _left(self, elapsed: float) -> str:
        """'3 cells left, weakest ○ 0 of 6 exercised', or '' once every cell met its rule."""
        if not getattr(self, "open", None):
            return ""
        left = self.left_cells()
        if not left:
            return "every cell settled"
        weakest = min((self.ledger.tally(t) for t in left), key=_worst_first)
        return f"{len(left)} cells left, weakest {weakest.standing()}"
