"""The one place a typed Verdict becomes words: what a matrix cell, a timeline title and a table say.

Nothing else writes verdict text, so a behaviour is worded the same wherever it appears. The words
carry the figures that identify a finding (rows at the end, what an observer saw, how soon a lost
lock was detected); counts across trials are the report's business.
"""

from __future__ import annotations

from lab.checkers.verdict import SAFETY_OF, Kind, Verdict

# Calibration's detection, from the poller's view of a killed lock session.
DETECTION = {"within one poll": "lost within one poll", "late": "lost, detected late",
             "not detected": "lost, never detected"}

WORDS = {
    Kind.ACKNOWLEDGED_WRITE_LOST: "acknowledged write lost",
    Kind.STALE_WRITE_ACCEPTED: "stale write accepted",
    Kind.OVERLAPPING_WRITES: "overlapping writes",
    Kind.FALSE_RELEASE: "false release",
    Kind.INDETERMINATE: "lost, holder write indeterminate",
    Kind.LOST: "lost",
    Kind.STALE_WRITE_REJECTED: "stale write rejected",
    Kind.ROLLED_BACK: "rolled back",
    Kind.HELD: "held",
    Kind.NOT_ACQUIRED: "not acquired",
}

# A margin step (lab/measures/margin.py) whose lease was visibly gone (a renewal failed, its release raised) while
# nobody else got in: neither survived nor broke.
LAPSED = "lease lost, not taken"

# What each kind means, for a legend.
MEANING = {
    Kind.ACKNOWLEDGED_WRITE_LOST: "a rebuild whose commit returned ok is not in the company at the end, and no write "
                                  "that landed after it replaced it (a primary rewound after a split brain, say)",
    Kind.STALE_WRITE_ACCEPTED: "the storage committed a run's write after a newer run had the company",
    Kind.OVERLAPPING_WRITES: "two runs were inside committed writes of one company at once",
    Kind.MERGED: "two rebuilds' rows ended in one company",
    Kind.SHORT: "the company ended with fewer rows than one rebuild",
    Kind.TORN: "an observer saw a half-written company",
    Kind.FALSE_RELEASE: "release reported success for a lock another run had taken",
    Kind.INDETERMINATE: "a lapsed holder's COMMIT was in flight when its connection broke, and the table could "
                        "not say whether it landed",
    Kind.LOST: "another run got the lock while the holder still believed it held; the trial wrote nothing "
               "after that, so the write columns say what it costs",
    Kind.STALE_WRITE_REJECTED: "the lock was lost and the storage's fence refused the lapsed holder's write",
    Kind.ROLLED_BACK: "the holder's right ended with its transaction, and its write rolled back",
    Kind.INTACT: "another run rebuilt the company after the first, and it stayed whole",
    Kind.HELD: "nobody else got in",
    Kind.NOT_ACQUIRED: "the holder never got the lock, so nothing was tested",
}


def verdict_text(verdict: Verdict) -> str:
    """'merged (500 rows)', 'lost within one poll', 'stale write rejected', '3 schedules struck, none failed'."""
    figures = verdict.figures
    if "schedules_struck" in figures:
        return _search_text(verdict)
    if "margin" in figures:
        return margin_text(figures["margin"], verdict)
    if figures.get("grant") and verdict.kind in (Kind.INTACT, Kind.HELD, Kind.NOT_ACQUIRED):
        return figures["grant"]  # the holder's grant never came back, so it never believed it held
    rows = figures.get("rows")
    if verdict.kind in (Kind.MERGED, Kind.SHORT, Kind.INTACT):
        return f"{verdict.kind.value} ({rows} rows)" if rows is not None else verdict.kind.value
    if verdict.kind is Kind.TORN:
        return f"torn (saw {figures.get('seen')})" if figures.get("seen") else "torn"
    if verdict.kind is Kind.LOST and figures.get("detection") in DETECTION:
        return DETECTION[figures["detection"]]
    if verdict.kind is Kind.HELD and figures.get("detection") == "not detected":
        return "held (a killed session's lock never seen free)"
    return WORDS[verdict.kind]


def _search_text(verdict: Verdict) -> str:
    """A kill-point search: the schedules that struck, or the kinds its smallest counterexample showed."""
    figures = verdict.figures
    if not figures.get("counterexample"):
        return f"{figures['schedules_struck']} schedules struck, none failed"
    kinds = sorted({f.kind.value for f in verdict.findings if f.kind is not None and f.valid.value == "false"
                    and SAFETY_OF[f.kind] is verdict.safety})  # what made it a counterexample, not the lock's loss
    prefix = "counterexample (did not fail on every replay): " if figures.get("flaky") else "counterexample: "
    return prefix + ", ".join(kinds or [verdict.kind.value])


def margin_text(margin: dict, verdict: Verdict | None = None) -> str:
    """'survived 0.94 TTL (2 trials), broke at 0.97 TTL (2 trials: stale write accepted)': a margin search's bounds
    (lab/measures/margin.py), each with the trials behind it; a bound from one trial says so, and a breaking point
    on fewer broken trials than it needs says how many of them ('1 of 2')."""
    def trials(n: int) -> str:
        return "1 trial" if n == 1 else f"{n} trials"

    parts = []
    if margin.get("survived") is not None:
        parts.append(f"survived {margin['survived']:g} TTL ({trials(margin['survived_trials'])})")
    else:
        parts.append("survived no strength tried")
    if margin.get("broke") is not None:
        what = f": {WORDS.get(verdict.kind, verdict.kind.value)}" if verdict is not None else ""
        breaks, needed = margin.get("breaks"), margin.get("breaks_needed")  # a run before issue 56 has neither
        short = f"; {breaks} of {needed}" if breaks is not None and needed is not None and breaks < needed else ""
        parts.append(f"broke at {margin['broke']:g} TTL ({trials(margin['broke_trials'])}{what}{short})")
    else:
        parts.append("never broke in the range")
    text = ", ".join(parts)
    if margin.get("contradictions"):
        text += f"; survived above a broken strength at {', '.join(f'{s:g}' for s in margin['contradictions'])} TTL"
    if margin.get("lapsed"):
        text += f"; {LAPSED} at {', '.join(f'{s:g}' for s in margin['lapsed'])} TTL"
    return text
