"""Checkers: pure functions from a trial's measures to its verdict, so no verdict is typed by hand."""

from __future__ import annotations


def lock_verdict(acquired: bool, contender_got: list[bool]) -> str:
    """'lost' when another run got the lock while the holder believed it held it."""
    if not acquired:
        return "not acquired"
    return "lost" if any(contender_got) else "held"


def detected_within(gap: float | None, poll: float) -> str:
    """Calibration: did the poller get a killed holder's lock by the end of the next poll?

    The next poll starts at most one interval after the kill and takes up to one more,
    so 'within one poll' means a gap of at most two intervals (2.10 s for a kill at 2.00 s).
    """
    if gap is None:
        return "not detected"
    return "within one poll" if gap <= 2 * poll else "late"


def company_state(rows_expected: int, rows_final: int, runs_in: list[str]) -> str:
    """Whether a company ended as exactly one run's rebuild.

    'merged' is the post's 500-row failure: two rebuilds' rows in one company.
    """
    if rows_final > rows_expected or len(runs_in) > 1:
        return f"merged ({rows_final} rows)"
    if rows_final < rows_expected:
        return f"short ({rows_final} rows)"
    return f"intact ({rows_final} rows)"


def torn_counts(rows_seen: list[int], rows_expected: int) -> list[int]:
    """Row counts an observer saw that are not a whole company: half-deleted or doubled states."""
    return [count for count in rows_seen if count != rows_expected]


def lease_verdict(lost: bool, holder_write: str) -> str:
    """What became of the holder's write once another run may have taken over.

    'stale write accepted' is the violation fencing exists to stop: the holder's right had
    lapsed, another run had the company, and the storage still took the holder's write.
    """
    if not lost:
        return "held" if holder_write == "committed" else f"held, holder write {holder_write}"
    return {"committed": "stale write accepted", "rejected": "stale write rejected",
            "failed": "rolled back"}.get(holder_write, f"lost, holder write {holder_write}")


# Verdicts that mean the lock failed at its one job; everything else kept the company whole.
VIOLATIONS = ("lost", "stale write accepted", "merged", "torn", "short")


def is_violation(verdict: str) -> bool:
    return verdict.startswith(VIOLATIONS)
