"""What a lock costs per company, as the run measured it: a figure the ranking can compare, never a sentence."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CompanyCost:
    """A company's write transaction with the lock, median seconds with min-max over repetitions."""

    seconds: float
    low: float
    high: float
    repetitions: int
    companies: int

    def overlaps(self, other: CompanyCost) -> bool:
        """Whether the two spreads meet: a difference inside them decides nothing (the design's timing rule)."""
        return self.low <= other.high and other.low <= self.high

    def words(self) -> str:
        """'1.37 ms a company (1.30–1.44, 3 repetitions)'."""
        return (f"{self.seconds * 1000:.2f} ms a company ({self.low * 1000:.2f}–{self.high * 1000:.2f}, "
                f"{self.repetitions} repetition{'' if self.repetitions == 1 else 's'})")
