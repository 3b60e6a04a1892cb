"""A lock's standing for a decision: each fault column it faced, sorted into what the lock did there.

Outcomes a decision can count: kept (✓, the right taken away and the company whole), failed (✗, or ⚠ a lock lost
while its holder believed it held: the lock broke its promise), store (◆, the database lost acknowledged writes, as
the control did), unaffected (○ where the fault cannot reach the lock, by declaration), not exercised (○ with no
such reason: proves nothing), unknown (?, errors, not run, does not run) and n/a (the fault reaches none of its
parts, by its declaration).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from enum import Enum

from lab.decision.cells import Cell, Mark


class Outcome(str, Enum):
    """What one fault column says of one lock, for a decision."""

    KEPT = "kept"
    FAILED = "failed"
    STORE = "store"
    UNAFFECTED = "unaffected"
    NOT_EXERCISED = "not exercised"
    UNKNOWN = "unknown"
    NOT_APPLICABLE = "n/a"


OUTCOME_OF = {
    Mark.KEPT: Outcome.KEPT, Mark.FAILED: Outcome.FAILED, Mark.LOST: Outcome.FAILED, Mark.STORE: Outcome.STORE,
    Mark.UNAFFECTED: Outcome.UNAFFECTED, Mark.NOT_EXERCISED: Outcome.NOT_EXERCISED, Mark.UNKNOWN: Outcome.UNKNOWN,
    Mark.ERROR: Outcome.UNKNOWN, Mark.NOT_RUN: Outcome.UNKNOWN, Mark.DOES_NOT_RUN: Outcome.UNKNOWN,
    Mark.NOT_APPLICABLE: Outcome.NOT_APPLICABLE,
}
# What answers a fault that failed a rival: a ✓ with its n, a store's loss with the lock's promise kept, a
# declared and checked reason the fault cannot reach the lock, or n/a. Anything else leaves the lock unproven there.
ANSWERS_A_RIVALS_FAILURE = frozenset({Outcome.KEPT, Outcome.STORE, Outcome.UNAFFECTED, Outcome.NOT_APPLICABLE})


def outcome_of(cell: Cell) -> Outcome:
    """The decision's reading of a cell (the control's own cells are never a candidate's)."""
    if cell.mark is Mark.KEPT and not cell.exercised:
        return Outcome.NOT_EXERCISED  # a ✓ of a run that never recorded the right taken away: counted only as whole
    return OUTCOME_OF.get(cell.mark, Outcome.UNKNOWN)


@dataclass(frozen=True)
class Standing:
    """One backend's cells over a set of fault columns (label -> cell), sorted by outcome."""

    backend: str
    cells: dict[str, Cell]

    @cached_property
    def by_outcome(self) -> dict[Outcome, list[str]]:
        """Outcome -> the labels of the columns with it, in column order (each cell read once)."""
        out: dict[Outcome, list[str]] = {outcome: [] for outcome in Outcome}
        for label, cell in self.cells.items():
            out[outcome_of(cell)].append(label)
        return out

    def faults(self, outcome: Outcome) -> list[str]:
        """The labels of the columns with this outcome, in column order."""
        return list(self.by_outcome[outcome])

    def count(self, outcome: Outcome) -> int:
        return len(self.faults(outcome))

    @property
    def kept_trials(self) -> int:
        """The exercised trials behind its ✓ cells."""
        return sum(self.cells[label].exercised for label in self.by_outcome[Outcome.KEPT])

    def weakest(self, among: list[str] | None = None) -> tuple[str, Cell] | None:
        """Its ✓ cell with the highest bound (the fewest exercised trials), among some columns (default: all), or
        None without a ✓ there."""
        kept = [(label, self.cells[label]) for label in self.by_outcome[Outcome.KEPT]
                if among is None or label in among]
        return max(kept, key=lambda lc: (lc[1].bound or 1.0), default=None)


def counts_line(s: Standing) -> str:
    """'kept 16 · failed 0 · store 2 · unaffected 1 · not exercised 5 · unknown 1 · n/a 3'."""
    return " · ".join(f"{outcome.value} {s.count(outcome)}" for outcome in Outcome)
