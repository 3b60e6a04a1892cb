"""What a lock costs per company, as the run measured it: a figure the ranking can compare, never a sentence.

Two costs are compared by their paired ratios to the no-lock control timed beside each (the company-cost scenario),
where both have them and write to the same store: seconds timed minutes apart on a shared machine are no
comparison. A difference inside both ranges decides nothing (the design's timing rule). A run that timed only the
post's cost table has seconds alone, compared by their spreads.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CompanyCost:
    """A company's write transaction with the lock: median seconds with min-max over repetitions, and where measured
    beside the control, its paired ratio to no lock (median, min, max) and the store it wrote to."""

    seconds: float
    low: float
    high: float
    repetitions: int
    companies: int
    ratio: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    store: str | None = None

    def _range(self, other: CompanyCost) -> tuple[tuple[float, float], tuple[float, float]]:
        paired = (self.ratio_low is not None and self.ratio_high is not None and other.ratio_low is not None
                  and other.ratio_high is not None and self.store == other.store)
        if paired:
            return (self.ratio_low, self.ratio_high), (other.ratio_low, other.ratio_high)  # type: ignore[return-value]
        return (self.low, self.high), (other.low, other.high)

    def overlaps(self, other: CompanyCost) -> bool:
        """Whether the two ranges meet (paired ratios where both have them on one store, else seconds)."""
        (a_low, a_high), (b_low, b_high) = self._range(other)
        return a_low <= b_high and b_low <= a_high

    @property
    def key(self) -> float:
        """What orders costs that do not overlap: the median ratio where measured beside the control, else seconds."""
        return self.ratio if self.ratio is not None else self.seconds

    def words(self) -> str:
        """'1.37 ms a company, 1.02× no lock (0.98–1.05, 5 repetitions)'."""
        reps = f"{self.repetitions} repetition{'' if self.repetitions == 1 else 's'}"
        if self.ratio is not None:
            return (f"{self.seconds * 1000:.2f} ms a company, {self.ratio:.2f}× no lock ({self.ratio_low:.2f}–"
                    f"{self.ratio_high:.2f}, {reps})")
        return f"{self.seconds * 1000:.2f} ms a company ({self.low * 1000:.2f}–{self.high * 1000:.2f}, {reps})"
