"""The report's first screen: which backend for which need, and the post's 'Why not just...?' with evidence.

Every statement is computed from the matrix cells and measured rows, so it says only
what the run showed; where no scenario covers an alternative the row says so.
"""

from __future__ import annotations

import statistics

import pandas as pd

import backends
from lab.outcomes import outcome_text
from lab.report.common import md_table, ok_trials
from lab.report.matrix import FAULTS, cell

# (need, backend) in the order an engineer would look for them; then the ones to avoid.
NEEDS = [
    ("one writer per company, every write in PostgreSQL", "xact"),
    ("no lock code, and retries are acceptable", "serializable"),
    ("a lease without another service, fenced by PostgreSQL", "lease_row"),
    ("a lock in etcd", "etcd_fenced"),
    ("a lock in Redis", "redis_fenced"),
    ("one run-level lock held across many transactions", "session_autocommit"),
]


def _scorecard(frame: pd.DataFrame, backend: str) -> tuple[list[str], list[str]]:
    """(faults it kept the company whole under, faults it failed under), from the matrix cells."""
    good, bad = [], []
    for (scenario, variant), label in FAULTS:
        records = frame[(frame.scenario == scenario) & (frame.backend == backend)
                        & frame.variant.isin([variant])].to_dict("records")
        text = cell(records)
        if text.startswith("✓"):
            good.append(label)
        elif text.startswith("✗"):
            bad.append(label)
    return good, bad


def section_summary(frame: pd.DataFrame) -> str | None:
    present = set(frame.backend)
    lines = []
    for need, backend in NEEDS:
        if backend not in present:
            continue
        good, bad = _scorecard(frame, backend)
        if not good and not bad:
            continue
        verdict = f"kept the company whole under all {len(good)} faults measured" if not bad else \
            f"kept it whole under {len(good)} of {len(good) + len(bad)} faults; failed under: {', '.join(bad)}"
        lines.append(f"- **{need}**: `{backend}` {verdict}.")
    avoid = []
    recommended = {backend for _, backend in NEEDS}
    for backend in [b for b in sorted(present, key=backends.rank) if b not in recommended]:
        _, bad = _scorecard(frame, backend)
        if bad:
            avoid.append(f"`{backend}` ({', '.join(bad)})")
    if not lines and not avoid:
        return None
    out = ["## Summary: which lock for which need", "",
           "Computed from the matrix below: a fault counts against a backend when any trial of it failed "
           "(✗ in its cell).", "", *lines, ""]
    if avoid:
        out += ["Failed the lock's one job under at least one measured fault: " + "; ".join(avoid) + ".", ""]
    return "\n".join(out)


def _cases_cell(frame, backend, variant) -> str | None:
    group = ok_trials(frame, "cases")
    group = group[(group.backend == backend) & (group.variant == variant)]
    return outcome_text(group.to_dict("records")) if not group.empty else None


def _timing_range(frame) -> str | None:
    group = ok_trials(frame, "timing")
    group = group[group.backend == "session"]
    firsts = [m["first_got_at"] for m in group.measures if m["first_got_at"] is not None]
    if not firsts:
        return None
    timeout = group.measures.iloc[0]["timeout_s"]
    return (f"measured: with a {timeout:g} s timeout every overlap came after it ({min(firsts):.2f}-"
            f"{max(firsts):.2f} s, {len(firsts)}/{len(group)} trials): a bigger timer moves the loss, it does "
            f"not remove it")


def _perf_ratio(frame) -> str | None:
    group = ok_trials(frame, "perf")
    medians = {v: statistics.median(m["seconds"] for m in g.measures) for v, g in group.groupby("variant")}
    if "one_transaction_for_all" not in medians or "per_company_lock" not in medians:
        return None
    return (f"measured: cheapest ({medians['one_transaction_for_all']:.2f} s against "
            f"{medians['per_company_lock']:.2f} s for a transaction and lock per company, same run); "
            f"vacuum and lost work on failure are reasoned, not measured")


def _serializable(frame) -> str | None:
    parts = []
    overlap = ok_trials(frame, "overlap")
    rows = [m["rows_final"] for m in overlap[overlap.backend == "serializable"].measures]
    if rows:
        parts.append(f"two rebuilds at once end at {', '.join(map(str, rows))} rows")
    conflicts = ok_trials(frame, "conflicts")
    for design in ("no_index", "adjacent_ids", "spread_ids"):
        counts = [m["failed"] for m in conflicts[conflicts.variant == design].measures]
        if counts:
            parts.append(f"{design.replace('_', ' ')}: {'/'.join(map(str, counts))} of 8 failed")
    return ("measured: " + "; ".join(parts)) if parts else None


def _leases(frame) -> str | None:
    rows = frame[frame.scenario.isin(["pause", "cut", "restart"]) & (frame.status == "ok")]
    if rows.empty:
        return None
    accepted = rows[rows.verdict == "stale write accepted"].backend.unique().tolist()
    rejected = rows[rows.verdict == "stale write rejected"].backend.unique().tolist()
    return (f"measured (pause, cut, restart): stale writes accepted by {', '.join(accepted) or 'none'}; "
            f"refused by the fence for {', '.join(rejected) or 'none'}; see the lease section")


def _heartbeat(frame) -> str | None:
    text = _cases_cell(frame, "session_commit", "query_then_idle_in_transaction")
    return None if text is None else (f"measured: one more query on a committed lock connection opens a new "
                                      f"transaction and the lock is lost again: session_commit {text} (case D)")


WHY_NOT = [
    ("SET idle_in_transaction_session_timeout = 0, on the session or a role",
     "It works, but it exempts the session from a guard the owner set on purpose and leaves the transaction open.",
     None),
    ("A heartbeat select 1", "It proves the connection is alive, not the run.", _heartbeat),
    ("Raise the timeout", "It hides every other leaked transaction.", _timing_range),
    ("One giant transaction", "It holds a transaction id for hours and loses all work on failure.", _perf_ratio),
    ("Redis, etcd or a lease row", "The holder can lose the lock and keep writing, so the database must check a "
                                   "fencing token.", _leases),
    ("A row lock or a unique constraint", "A row lock needs a parent row per company; a unique constraint is a "
                                          "backstop, not exclusion.", None),
    ("SERIALIZABLE with retry", "It works, but unrelated companies can fail together.", _serializable),
    ("A queue, an idempotent rebuild, the lock on the writes' connection, Kafka partitioning",
     "Each solves a neighbouring problem.", None),
]


def section_why_not(frame: pd.DataFrame) -> str:
    rows = []
    for alternative, post, evidence in WHY_NOT:
        measured = evidence(frame) if evidence is not None else None
        rows.append([alternative, post, measured or "reasoned, not measured (no scenario covers it)"])
    return "\n".join(["## Why not just...?", "",
                      "The post's alternatives, its reason, and what this run measured about each.", "",
                      md_table(["alternative", "post", "evidence here"], rows), ""])
