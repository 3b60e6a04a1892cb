"""Measure-level checkers of schema 1's scenarios and the measures scenarios still word themselves (cost,
netdrop); the history checkers every judged scenario uses are lab/checkers/judge.py."""

from __future__ import annotations


def detected_within(gap: float | None, poll: float, still_held_at: float | None | str = "unrecorded") -> str:
    """Calibration: did the server free a killed holder's lock by the end of the next poll?

    still_held_at: how long after the kill the last poll that found the lock still taken started
    (None: no poll after the kill failed). With it, 'late' means the server still held the lock a
    full interval after the kill; a poller that merely woke late on a busy client is not the
    server's delay, and its lag shows in the gap. Runs that did not record it fall back to the gap:
    the next poll starts at most one interval after the kill and takes up to one more, so 'within
    one poll' means a gap of at most two intervals (2.10 s for a kill at 2.00 s).
    """
    if gap is None:
        return "not detected"
    if not isinstance(still_held_at, str):  # recorded (the one string is the default, "unrecorded")
        return "late" if still_held_at is not None and still_held_at > poll else "within one poll"
    return "within one poll" if gap <= 2 * poll else "late"


def company_whole(rows_expected: int, rows_final: int, runs_in: list[str]) -> bool:
    """Whether a company ended as exactly one run's whole rebuild: the typed answer company_state words."""
    return rows_final == rows_expected and len(runs_in) <= 1


def company_state(rows_expected: int, rows_final: int, runs_in: list[str]) -> str:
    """Whether a company ended as exactly one run's rebuild, in words.

    'merged' is the post's 500-row failure: two rebuilds' rows in one company.
    """
    if rows_final > rows_expected or len(runs_in) > 1:
        return f"merged ({rows_final} rows)"
    if rows_final < rows_expected:
        return f"short ({rows_final} rows)"
    return f"intact ({rows_final} rows)"
