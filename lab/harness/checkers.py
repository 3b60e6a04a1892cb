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
VIOLATIONS = ("lost", "stale write accepted", "merged", "torn", "short", "counterexample")


def is_violation(verdict: str) -> bool:
    return verdict.startswith(VIOLATIONS)


# --- History checkers: pure functions of (history, final table) -> violations ---------------------------

def _commits(events: list[dict]) -> list[dict]:
    """Committed writes, each stamped with the time its COMMIT was requested (the sound bound), in that order."""
    requested, out = {}, []
    for e in sorted(events, key=lambda e: e["t"]):
        key = (e["run"], e.get("company"))
        if e["event"] == "commit_requested":
            requested[key] = e["t"]
        elif e["event"] == "write_committed":
            out.append({**e, "t": requested.pop(key, e["t"])})
    return sorted(out, key=lambda e: e["t"])


def _grants_of_company(events: list[dict], company: int) -> list[tuple[float, str]]:
    """(time, run) when each run got the right to write company, as the storage saw it.

    A run that locked the company inside its write (a lock or fence in the transaction) got it
    then; a run that never did got it with its run-level grant.
    """
    out = []
    for run in sorted({e["run"] for e in events}):
        locks = [e["t"] for e in events if e["run"] == run and e["event"] == "company_locked"
                 and e.get("company") == company]
        out += [(t, run) for t in locks or [e["t"] for e in events if e["run"] == run
                                           and e["event"] == "acquire_granted" and not e.get("company_scoped")]]
    return sorted(out)


def stale_writes(events: list[dict]) -> list[dict]:
    """A write committed under a grant after another run was granted the company later.

    If run A was granted, then run B was granted the same company, A's right had lapsed: a write of
    A's committing after B's grant is a stale write the storage accepted (what a fencing token exists
    to refuse), whatever B did next (committed, failed, or never wrote). B's grant is its lock on the
    company inside its write when it took one (a fence B waited on behind A orders them), else its
    run-level grant.
    """
    out = []
    for write in _commits(events):
        company, run = write["company"], write["run"]
        grants = _grants_of_company(events, company)  # the writer's own grant is read the same way
        mine = max((t for t, who in grants if who == run and t <= write["t"]), default=None)
        if mine is None:
            continue
        later = [(t, other) for t, other in grants if other != run and mine < t < write["t"]]
        if later:
            t, other = later[0]
            out.append({"kind": "stale write accepted", "run": run, "company": company,
                        "detail": f"{run} (granted {mine:.3f}s) committed at {write['t']:.3f}s, after "
                                  f"{other} was granted the company at {t:.3f}s"})
    return out


def overlapping_writes(events: list[dict]) -> list[dict]:
    """Two runs holding one company inside committed writes at the same time.

    A write holds the company from its lock or fence inside the transaction (company_locked)
    or, without one, from its first statement (write_begun), until it asks to commit.
    """
    spans, entered, requested = [], {}, {}
    for e in sorted(events, key=lambda e: e["t"]):
        key = (e["run"], e.get("company"))
        if e["event"] in ("write_begun", "company_locked"):
            entered[key] = e["t"]
        elif e["event"] == "commit_requested":
            requested[key] = e["t"]
        elif e["event"] == "write_committed" and key in entered:
            spans.append((e["company"], e["run"], entered.pop(key), requested.pop(key, e["t"])))
    out = []
    for i, (c1, r1, s1, e1) in enumerate(spans):
        for c2, r2, s2, e2 in spans[i + 1:]:
            if c1 == c2 and r1 != r2 and s1 < e2 and s2 < e1:
                out.append({"kind": "exclusion violated", "company": c1, "run": f"{r1}+{r2}",
                            "detail": f"{r1} [{s1:.3f}-{e1:.3f}s] and {r2} [{s2:.3f}-{e2:.3f}s]"})
    return out


def _grants(events: list[dict]) -> list[tuple[float, str]]:
    """(time, run) of every run-level grant."""
    return [(e["t"], e["run"]) for e in events if e["event"] == "acquire_granted" and not e.get("company_scoped")]


def false_releases(events: list[dict]) -> list[dict]:
    """A release that reported success although another run had been granted the right since.

    The release is bounded by when it was requested: a grant to another run after that may be the
    release itself working (the server frees the lock before our call returns and is recorded).
    """
    grants = _grants(events)
    out = []
    for r in (e for e in events if e["event"] == "release" and e.get("ok")):
        asked = [e["t"] for e in events if e["run"] == r["run"] and e["event"] == "release_requested"
                 and e["t"] <= r["t"]]
        until = max(asked) if asked else r["t"]  # a history from before release_requested existed
        mine = [t for t, run in grants if run == r["run"] and t <= until]
        if mine and any(run != r["run"] and max(mine) < t < until for t, run in grants):
            out.append({"kind": "false release", "run": r["run"], "company": None,
                        "detail": "release reported success for a lock another run had taken"})
    return out


def torn_observations(events: list[dict], company_size: int) -> list[dict]:
    return [{"kind": "torn state", "run": "observer", "company": e["company"], "detail": f"saw {e['count']} rows"}
            for e in events if e["event"] == "observed" and e["count"] != company_size]


def mixed_companies(final: dict[int, dict], company_size: int) -> list[dict]:
    """final: company -> {'rows': n, 'runs': [run ids]}. One company must hold one rebuild, whole."""
    out = []
    for company, state in sorted(final.items()):
        if len(state["runs"]) > 1 or state["rows"] != company_size:
            out.append({"kind": "mixed rows", "run": "+".join(state["runs"]), "company": company,
                        "detail": f"{state['rows']} rows from {state['runs']}"})
    return out


def check_history(events: list[dict], final: dict[int, dict], company_size: int,
                  promises_exclusion: bool) -> list[dict]:
    """Every violation in a trial; the exclusion-based checks apply where the backend promised exclusion."""
    found = torn_observations(events, company_size) + mixed_companies(final, company_size)
    if promises_exclusion:
        found += stale_writes(events) + overlapping_writes(events) + false_releases(events)
    return found
