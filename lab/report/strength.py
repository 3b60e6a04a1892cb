"""How strong a verdict is: the 95 % upper bound of a per-trial failure rate from the trials behind it.

A ✓ from n trials with no failure still allows a failure rate up to 1 - 0.05^(1/n): 95 % at n = 1, 78 % at
n = 2, 63 % at n = 3, 45 % at n = 5. The bound is Clopper-Pearson's, one-sided (the largest rate under which
seeing this few failures still has a 5 % chance), computed exactly from the binomial distribution.
"""

from __future__ import annotations

import math

CONFIDENCE = 0.95
# A ✓ counts as strong evidence for a recommendation when its bound is at most this: three exercised trials, none
# failed (63 %). A cell on one or two trials (95 %, 78 %) is weak, and a recommendation resting on one says so.
STRONG_AT_MOST = 0.65


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def upper_bound(failures: int, n: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided Clopper-Pearson upper bound of a failure rate after `failures` in `n` trials (1.0 when n is 0
    or every trial failed)."""
    if n <= 0 or failures >= n:
        return 1.0
    if failures == 0:
        return 1 - (1 - confidence) ** (1 / n)
    low, high = failures / n, 1.0
    for _ in range(60):  # bisection: the cdf falls as p rises
        mid = (low + high) / 2
        if binomial_cdf(failures, n, mid) > 1 - confidence:
            low = mid
        else:
            high = mid
    return high


def strong(bound: float | None) -> bool:
    """Whether a ✓'s bound meets the declared one (STRONG_AT_MOST)."""
    return bound is not None and bound <= STRONG_AT_MOST


def bound_text(bound: float) -> str:
    """'≤63%': how the matrix shows a ✓'s bound."""
    return f"≤{bound * 100:.0f}%"


RULE = (f"a ✓ shows the 95 % upper bound of its per-trial failure rate (Clopper-Pearson, one-sided, over the trials "
        f"that took the right away: ≤95% after 1, ≤78% after 2, ≤63% after 3, ≤45% after 5); it counts as strong at "
        f"≤{STRONG_AT_MOST * 100:.0f}%, weak above")
