"""How strong a verdict is: the 95 % bounds of a per-trial failure rate from the trials behind it.

A ✓ from n trials with no failure still allows a failure rate up to 1 - 0.05^(1/n): 95 % at n = 1, 63 % at
n = 3, 26 % at n = 10, 14 % at n = 20. The bound is Clopper-Pearson's, one-sided (the largest rate under which
seeing this few failures still has a 5 % chance), computed exactly from the binomial distribution; a ✗ states its
rate with the two-sided 95 % interval of the same family.
"""

from __future__ import annotations

import math

CONFIDENCE = 0.95
# A ✓ counts as strong evidence when its bound is at most this: 20 exercised trials, none failed (13.9 %). A lock
# that fails one trial in three passes three trials 30 % of the time; twenty, once in 3,300.
STRONG_AT_MOST = 0.14
STRONG_TRIALS = 20  # the fewest exercised trials, none failed, whose bound is STRONG_AT_MOST or less


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def _solve(falls_past, low: float = 0.0, high: float = 1.0) -> float:
    """The p where a function of p, falling as p rises, crosses its target (bisection, 60 halvings)."""
    for _ in range(60):
        mid = (low + high) / 2
        if falls_past(mid):
            high = mid
        else:
            low = mid
    return high


def upper_bound(failures: int, n: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided Clopper-Pearson upper bound of a failure rate after `failures` in `n` trials (1.0 when n is 0
    or every trial failed)."""
    if n <= 0 or failures >= n:
        return 1.0
    if failures == 0:
        return 1 - (1 - confidence) ** (1 / n)
    return _solve(lambda p: binomial_cdf(failures, n, p) <= 1 - confidence, failures / n)


def interval(failures: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The two-sided Clopper-Pearson interval of a failure rate after `failures` in `n` trials: (low, high)."""
    if n <= 0:
        return 0.0, 1.0
    tail = (1 - confidence) / 2
    low = 0.0 if failures == 0 else _solve(lambda p: 1 - binomial_cdf(failures - 1, n, p) >= tail)
    high = 1.0 if failures >= n else _solve(lambda p: binomial_cdf(failures, n, p) <= tail)
    return low, high


def strong(bound: float | None) -> bool:
    """Whether a ✓'s bound meets the declared one (STRONG_AT_MOST)."""
    return bound is not None and bound <= STRONG_AT_MOST


def bound_text(bound: float) -> str:
    """'≤63%': how the matrix shows a ✓'s bound."""
    return f"≤{bound * 100:.0f}%"


def rate_text(failures: int, n: int) -> str:
    """'4/20 (95 %: 6–44 %)': a ✗'s failure rate with its interval."""
    low, high = interval(failures, n)
    return f"{failures}/{n} (95 %: {low * 100:.0f}–{high * 100:.0f} %)"


RULE = (f"a ✓ shows the 95 % upper bound of its per-trial failure rate (Clopper-Pearson, one-sided, over the trials "
        f"that took the right away; a kill-point search counts each schedule that struck as a trial): ≤95% after 1, "
        f"≤63% after 3, ≤26% after 10, ≤14% after {STRONG_TRIALS}; it counts as strong at "
        f"≤{STRONG_AT_MOST * 100:.0f}%, weak above; a ✗ gives its rate, failed trials of all, with the two-sided 95 % "
        f"interval")
