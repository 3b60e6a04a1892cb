"""Checkers: pure functions from a trial's measures to its verdict, so no verdict is typed by hand."""

from __future__ import annotations


def lock_verdict(acquired: bool, contender_got: list[bool]) -> str:
    """'lost' when another run got the lock while the holder believed it held it."""
    if not acquired:
        return "not acquired"
    return "lost" if any(contender_got) else "held"


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
    if still_held_at != "unrecorded":
        return "late" if still_held_at is not None and still_held_at > poll else "within one poll"
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


def _right_of(events: list[dict], run: str, company: int, before: float) -> float | None:
    """When run last got its right to write company before a time, in real time: its run-level grant,
    else (a lock that exists only inside the write) its lock on the company."""
    run_level = [e["t"] for e in events if e["run"] == run and e["event"] == "acquire_granted"
                 and not e.get("company_scoped") and e["t"] <= before]
    if run_level:
        return max(run_level)
    locks = [e["t"] for e in events if e["run"] == run and e["event"] == "company_locked"
             and e.get("company") == company and e["t"] <= before]
    return max(locks) if locks else None


def stale_writes(events: list[dict]) -> list[dict]:
    """A write that landed after a newer holder's right to the same company: the storage accepted it.

    Run B is newer than run A when B got its right later (real time). A's write is stale when, before
    it committed, a newer run B
    - committed its own write of the company (A's landed on B's newer rebuild), or
    - held the company: where the storage locks or fences each company inside the write, from B's
      lock on it (a newer run still waiting behind A's lock is ordered after A by the storage, and
      one the fence refused never held it); elsewhere from B's run-level grant, whatever B did next
      (committed, failed, or never wrote).
    """
    storage_orders = any(e["event"] == "company_locked" for e in events)
    runs = sorted({e["run"] for e in events})
    commits = _commits(events)
    out = []
    for write in commits:
        company, run, at = write["company"], write["run"], write["t"]
        mine = _right_of(events, run, company, at)
        if mine is None:
            continue
        found = None
        for other in (r for r in runs if r != run):
            for theirs in (c for c in commits if c["run"] == other and c["company"] == company and c["t"] < at):
                granted = _right_of(events, other, company, theirs["t"])
                if granted is not None and granted > mine:
                    found = f"after {other} (granted {granted:.3f}s) had committed its rebuild at {theirs['t']:.3f}s"
            if found:
                break
            held = [e["t"] for e in events if e["run"] == other and mine < e["t"] < at
                    and (e["event"] == "company_locked" and e.get("company") == company if storage_orders
                         else e["event"] == "acquire_granted" and not e.get("company_scoped"))]
            newer = [t for t in held if (_right_of(events, other, company, t) or 0) > mine]
            if newer:
                found = f"after {other} was granted the company at {newer[0]:.3f}s"
                break
        if found:
            out.append({"kind": "stale write accepted", "run": run, "company": company,
                        "detail": f"{run} (granted {mine:.3f}s) committed at {at:.3f}s, {found}"})
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
