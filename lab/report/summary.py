"""The post's 'Why not just...?' with this run's evidence, right after the decision page (lab/report/decide.py).

Every statement is computed from measured rows, so it says only what the run showed; where no
scenario covers an alternative the row says so.
"""

from __future__ import annotations

import statistics


from lab.declarations.capabilities import Capability
from lab.checkers.outcomes import lock_lost, outcome_text
from lab.measures.kinds import Measured
from lab.declarations.post_role import PostRole
from lab.report import whynot
from lab.report.common import md_table, ok_trials, with_capability, with_role
from lab.report.matrix import lease_faults_run
from lab.report.sections import WHYNOT, RunView, section


def _timing_range(frame) -> str | None:
    group = ok_trials(frame, Measured.GUARD_TIMING)
    group = with_role(group, PostRole.METHOD_1)
    firsts = [m["first_got_at"] for m in group.measures if m["first_got_at"] is not None]
    if not firsts:
        return None
    timeout = group.measures.iloc[0]["timeout_s"]
    before = sum(f < timeout for f in firsts)
    when = "every overlap came after it" if not before else f"{before} of {len(firsts)} overlaps came before it"
    return (f"measured: with a {timeout:g} s timeout {when} ({min(firsts):.2f}-{max(firsts):.2f} s, "
            f"{len(firsts)}/{len(group)} trials overlapped): a bigger timer moves the loss, it does not remove it")


PERF_BASE = "one_transaction_for_all"
PERF_WORDS = {"transaction_per_company": "a transaction per company", "per_company_lock":
              "a transaction and lock per company", "batch_50_sorted": "50 companies per transaction",
              "workers_2": "2 workers", "workers_4": "4 workers", "workers_8": "8 workers",
              "per_company_lock_copy": "COPY per company"}
PERF_TOLERANCE = ("a configuration counts as faster only when its median is below the other's fastest "
                  "repetition; closer than that is within noise")


def perf_ranking(frame) -> list[tuple[str, float, float, float, int]]:
    """(variant, median, min, max, n) of every perf configuration, fastest median first (ties by name)."""
    group = ok_trials(frame, Measured.COST)
    stats = []
    for variant, g in group.groupby("variant"):
        seconds = [m["seconds"] for m in g.measures]
        stats.append((variant, statistics.median(seconds), min(seconds), max(seconds), len(seconds)))
    return sorted(stats, key=lambda s: (s[1], s[0]))


def _perf_ratio(frame) -> str | None:
    ranking = perf_ranking(frame)
    base = next((s for s in ranking if s[0] == PERF_BASE), None)
    others = [s for s in ranking if s[0] != PERF_BASE]
    if base is None or not others:
        return None

    def named(s) -> str:
        return f"{PERF_WORDS.get(s[0], s[0].replace('_', ' '))} {s[1]:.2f} s"

    faster = [s for s in others if s[1] < base[2]]  # their median below one transaction's fastest run
    slower = [s for s in others if base[1] < s[2]]  # one transaction's median below their fastest run
    noise = [s for s in others if s not in faster and s not in slower]
    ours = f"{base[1]:.2f} s ({base[2]:.2f}-{base[3]:.2f}, n={base[4]})"
    if len(slower) == len(others):
        head = f"measured: cheapest, {ours} against {', '.join(named(s) for s in slower)}"
    else:
        parts = []
        if faster:
            parts.append("faster here: " + ", ".join(named(s) for s in faster))
        if noise:
            parts.append("within noise: " + ", ".join(named(s) for s in noise))
        if slower:
            parts.append("slower: " + ", ".join(named(s) for s in slower))
        # Nothing measurably faster: tied with what is within noise, not beaten by it.
        verdict = "not the cheapest here" if faster else "tied for cheapest within the noise"
        head = f"measured: {verdict}, {ours}; " + "; ".join(parts)
    return f"{head} (medians, same run; {PERF_TOLERANCE})"


def _serializable(frame) -> str | None:
    parts = []
    overlap = ok_trials(frame, Measured.OVERLAP)
    rows = [m["rows_final"] for m in with_capability(overlap, Capability.SERIALIZABLE).measures]
    if rows:
        parts.append(f"two rebuilds at once end at {', '.join(map(str, rows))} rows")
    conflicts = ok_trials(frame, Measured.CONFLICT_COST)
    for design in ("no_index", "adjacent_ids", "spread_ids"):
        counts = [m["failed"] for m in conflicts[conflicts.variant == design].measures]
        if counts:
            parts.append(f"{design.replace('_', ' ')}: {'/'.join(map(str, counts))} of 8 failed")
    return ("measured: " + "; ".join(parts)) if parts else None


def _leases(run: RunView) -> str | None:
    frame = run.frame
    names = [f.scenario for f in lease_faults_run(run)]
    rows = frame[frame.scenario.isin(names) & (frame.status == "ok")]
    if rows.empty:
        return None
    accepted = rows[rows.verdict == "stale write accepted"].backend.unique().tolist()
    rejected = rows[rows.verdict == "stale write rejected"].backend.unique().tolist()
    return (f"measured ({', '.join(names)}): stale writes accepted by {', '.join(accepted) or 'none'}; "
            f"refused by the fence for {', '.join(rejected) or 'none'}; see the lease section")


def _heartbeat(frame) -> str | None:
    group = ok_trials(frame, Measured.POST_CASE)
    group = with_role(group[group.variant == "query_then_idle_in_transaction"], PostRole.METHOD_2)
    if group.empty:
        return None
    text = outcome_text(group.to_dict("records"))
    lost = sum(lock_lost(r) for r in group.to_dict("records"))
    said = ("opens a new transaction and the lock is lost again" if lost == len(group) else
            f"lost the lock again in {lost} of {len(group)} trials" if lost else "did not lose the lock here")
    return f"measured: one more query on a committed lock connection {said}: session_commit {text} (case D)"


WHY_NOT = [
    ("SET idle_in_transaction_session_timeout = 0, on the session or a role",
     "It works, but it exempts the session from a guard the owner set on purpose and leaves the transaction open.",
     lambda run: whynot.guard_off(run.frame)),
    ("A heartbeat select 1", "It proves the connection is alive, not the run.", lambda run: _heartbeat(run.frame)),
    ("Raise the timeout", "It hides every other leaked transaction.", lambda run: _timing_range(run.frame)),
    ("One giant transaction", "It holds a transaction id for hours and loses all work on failure.",
     lambda run: whynot.giant_transaction(run.frame, _perf_ratio(run.frame))),
    ("Redis, etcd or a lease row", "The holder can lose the lock and keep writing, so the database must check a "
                                   "fencing token.", _leases),
    ("A row lock or a unique constraint", "A row lock needs a parent row per company; a unique constraint is a "
                                          "backstop, not exclusion.",
     lambda run: whynot.row_lock_or_unique(run.frame)),
    ("SERIALIZABLE with retry", "It works, but unrelated companies can fail together.",
     lambda run: _serializable(run.frame)),
    ("A queue, an idempotent rebuild, the lock on the writes' connection, Kafka partitioning",
     "Each solves a neighbouring problem.", lambda run: whynot.neighbours(run.frame)),
]


LEAD_LIMIT = 280  # characters of a finding the table quotes; the rest is one link away


def anchor(heading: str) -> str:
    """The id a Markdown viewer (GitHub's rule) gives a heading: lower case, punctuation dropped, spaces to -."""
    kept = "".join(ch for ch in heading.lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def lead(evidence: str) -> str:
    """The first finding of an evidence paragraph: up to its first top-level '; ', cut at a comma if long."""
    text = evidence.removeprefix("measured: ")
    depth, cut = 0, len(text)
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and text.startswith("; ", i):
            cut = i
            break
    first = text[:cut]
    if len(first) > LEAD_LIMIT:
        first = first[:first.rfind(", ", 0, LEAD_LIMIT)] + " …"
    return first + ("" if cut == len(text) and first == text else " …" if not first.endswith("…") else "")


def _evidence(run: RunView) -> list[tuple[str, str, str | None]]:
    return [(alternative, post, evidence(run) if evidence is not None else None)
            for alternative, post, evidence in WHY_NOT]


@section(12)
def section_why_not(run: RunView) -> str | None:
    rows = []
    for alternative, post, measured in _evidence(run):
        if measured is None:
            rows.append([alternative, post, "reasoned, not measured (no scenario covers it)", ""])
        else:
            rows.append([alternative, post, lead(measured), f"[all of it]({WHYNOT}#{anchor(alternative)})"])
    return "\n".join(["## Why not just...?", "",
                      "The post's alternatives, its reason, and the first thing this run measured about each; "
                      f"every figure behind it is one link away, in [{WHYNOT}]({WHYNOT}).", "",
                      md_table(["alternative", "post", "first finding here", "evidence"], rows), ""])


@section(12, file=WHYNOT)
def section_why_not_evidence(run: RunView) -> str | None:
    """Every figure behind each row of Why not just...?, a heading per alternative (the table links here)."""
    measured = [(alternative, post, text) for alternative, post, text in _evidence(run) if text is not None]
    if not measured:
        return None
    out = ["# Why not just...? The evidence", "",
           "Every figure this run measured about each of the post's alternatives; REPORT.md's table quotes the "
           "first of each.", ""]
    for alternative, post, text in measured:
        out += [f"## {alternative}", "", f"The post: *{post}*", "", text, ""]
    return "\n".join(out)
