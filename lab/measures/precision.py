"""When a repeated measurement has been repeated enough: a sequential rule on the spread of its paired ratios.

Why: a fixed count (three repetitions, five, 200 iterations) or a fixed duration repeats a tight measurement
long after its figure stopped moving and stops a noisy one before it means anything. A figure the lab repeats
for precision is a ratio paired within one repetition (a configuration over the baseline run beside it, four
workers over one, a lock over its server's floor), so the rule looks at those ratios: after at least `floor`
repetitions it stops once their range is within `tolerance` of their median on either side
(max - min <= 2 x tolerance x median), and at `cap` it stops whatever the spread, saying so. Pure: it sees
numbers, never a server, so a test can plant a tight sequence and a noisy one.

The range of n paired ratios holds their median with probability 1 - 2 / 2^n whatever their distribution
(75% at 3, 94% at 5): the floor is what that confidence costs, stated beside each figure with its count.

A measurement that serves a verdict may also stop once that verdict is settled: after the floor, when no further
repetition could change it (two ranges that overlap only widen as repetitions are added, so "within noise" is
final). The outcome says so (`settled`), and its figure is as noisy as its range says.

A measurement may also have a time budget: a repetition that cannot be cut short (a throughput slice ends when
its workers' blocked acquires return) can take a hundred times its planned length, so after any repetition, the
first included, the rule stops once the budget is spent, and the outcome says so (`out_of_time`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Sequence


def spread(ratios: Sequence[float]) -> float | None:
    """Half the range of the ratios over their median: the fraction they stray from their centre (None: no ratios;
    infinite around a median of 0)."""
    if not ratios:
        return None
    centre = statistics.median(ratios)
    return (max(ratios) - min(ratios)) / 2 / abs(centre) if centre else float("inf")


@dataclass(frozen=True)
class Rule:
    """Repeat at least `floor` times, at most `cap`; stop once the paired ratios lie within +-tolerance of their median."""

    tolerance: float  # a fraction of the median: 0.05 is +-5%
    floor: int
    cap: int

    def __post_init__(self):
        if not (1 <= self.floor <= self.cap) or self.tolerance <= 0:
            raise ValueError(f"a precision rule needs 1 <= floor <= cap and a positive tolerance, not {self}")

    def spread(self, ratios: Sequence[float]) -> float | None:
        """Half the range over the median: the fraction the ratios stray from their centre (None: not measurable)."""
        return spread(ratios)

    def enough(self, *series: Sequence[float]) -> bool:
        """Whether every series of paired ratios (one per figure the repetitions serve) has been repeated enough."""
        n = min((len(s) for s in series), default=0)
        if n >= self.cap:
            return True
        if n < self.floor:
            return False
        return all((self.spread(s) or 0.0) <= self.tolerance for s in series)

    def outcome(self, *series: Sequence[float], settled: bool = False, out_of_time: bool = False) -> dict:
        """What a measurement records of the rule: its parameters, the repetitions taken, and whether the spread
        was reached, the verdict it serves settled first, its time budget ran out, or the cap stopped it (then the
        figure is as noisy as its range says)."""
        n = min((len(s) for s in series), default=0)
        spreads = [self.spread(s) for s in series]
        reached = n >= self.floor and all((sp or 0.0) <= self.tolerance for sp in spreads)
        return {**self.as_dict(), "repetitions": n, "reached": reached, "settled": settled and not reached,
                "out_of_time": out_of_time and not reached,
                "spread": round(max((sp for sp in spreads if sp is not None), default=0.0), 4)}

    def as_dict(self) -> dict:
        return {"tolerance": self.tolerance, "floor": self.floor, "cap": self.cap}

    def describe(self) -> str:
        return (f"repeated until the paired ratios lie within +-{self.tolerance:.0%} of their median, at least "
                f"{self.floor} and at most {self.cap} times")


def repeat(rule: Rule, once: Callable[[int], Sequence[float]],
           settled: Callable[[], bool] | None = None,
           out_of_time: Callable[[], bool] | None = None) -> tuple[list[tuple[float, ...]], dict]:
    """Call once(i) for repetition i until the rule is satisfied; once returns that repetition's paired ratios
    (one per figure). `settled`, if given, says whether the verdict these repetitions serve can no longer change;
    it is asked only from the floor on. `out_of_time`, if given, says whether the measurement's time budget is
    spent; it is asked after every repetition. Returns every repetition's ratios and the rule's outcome."""
    done: list[tuple[float, ...]] = []
    while True:
        done.append(tuple(once(len(done))))
        series = list(zip(*done))
        if rule.enough(*series):
            return done, rule.outcome(*series)
        if settled is not None and len(done) >= rule.floor and settled():
            return done, rule.outcome(*series, settled=True)
        if out_of_time is not None and out_of_time():
            return done, rule.outcome(*series, out_of_time=True)


def describe(outcome: dict | None) -> str:
    """A recorded outcome in words for the report: '4 repetitions (spread +-3% <= +-5%)' or '... (the cap; ...)'."""
    if not outcome:
        return ""
    n, spread, tolerance = outcome["repetitions"], outcome["spread"], outcome["tolerance"]
    if outcome["reached"]:
        return f"{n} repetitions (spread +-{spread:.0%} within +-{tolerance:.0%})"
    if outcome.get("out_of_time"):  # older runs did not record it
        return f"{n} repetitions (its time budget ran out: spread +-{spread:.0%}, wider than +-{tolerance:.0%})"
    if outcome.get("settled"):  # older runs did not record it
        return f"{n} repetitions (the verdict settled: more could not change it; spread +-{spread:.0%})"
    return f"{n} repetitions (stopped at the cap: spread +-{spread:.0%}, wider than +-{tolerance:.0%})"
