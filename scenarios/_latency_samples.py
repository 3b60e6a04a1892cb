"""What the latency trial's steps share: the summary of a sample, the precision rule a step stops by, and the
check that an uncontended acquire was granted (scenarios/latency.py and the steps it runs from their own modules).
"""

from __future__ import annotations

import statistics

from lab.measures.precision import Rule


def rule(parts: int, tolerance_floor: tuple[float, int]) -> Rule:
    tolerance, floor = tolerance_floor
    return Rule(tolerance, min(floor, parts), parts)


def stats(values: list[float]) -> dict:
    """Median, p99 (nearest rank) and max, in seconds, with the sample count."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0}
    p99 = ordered[max(0, -(-len(ordered) * 99 // 100) - 1)]
    return {"p50": round(statistics.median(ordered), 7), "p99": round(p99, 7), "max": round(ordered[-1], 7),
            "n": len(ordered)}


def must(granted: object) -> None:  # truthy when granted, as a backend or its library says it
    if not granted:
        raise RuntimeError("an uncontended acquire was refused")
