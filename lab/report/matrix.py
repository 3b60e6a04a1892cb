"""The backends x faults matrix: every backend against every fault, each cell measured, marked by safety."""

from __future__ import annotations

from collections import Counter

import pandas as pd

import backends
from lab.checkers import is_violation
from lab.report.charts import matrix_chart
from lab.report.common import md_table

# (scenario, variant) -> column heading, in the order a reader meets the faults in the post.
FAULTS = [
    (("cases", "idle_in_transaction"), "idle in transaction past the timeout"),
    (("cases", "query_then_idle_in_transaction"), "one more query, then that timeout"),
    (("cases", "idle_session"), "idle_session_timeout"),
    (("calibrate", "terminate"), "lock session killed"),
    (("overlap", "two_runs"), "two runs at once"),
    (("kill", "after_delete"), "write session killed mid-write"),
    (("pause", "sigstop"), "holder paused past the TTL"),
    (("cut", "blackhole"), "lock connection cut past the TTL"),
    (("restart", "server_restart"), "lock server restarted"),
    (("killpoints", "search"), "kill points searched by hypothesis"),
]


def cell(records: list[dict]) -> str:
    """'✗ stale write accepted 3/3' / '✓ held 3/3' / 'n/a' / 'not run'."""
    if not records:
        return "not run"
    ok = [r for r in records if r["status"] == "ok"]
    if not ok:
        skipped = [r for r in records if r["status"] == "skipped"]
        if skipped and all(str(r.get("reason") or "").startswith("does not run") for r in skipped):
            return "does not run"  # the library cannot work against these servers; the reason is in Every outcome
        return "n/a" if skipped else f"error {len(records)}/{len(records)}"
    counts = Counter(r["verdict"] for r in ok)
    unsafe = any(is_violation(v) for v in counts)
    # Calibration measures detection: a lock lost within one poll is still a lost lock.
    total = len([r for r in records if r["status"] != "skipped"])
    text = ", ".join(f"{('lost ' if v == 'within one poll' else '') + v} {n}/{total}"
                     for v, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    errors = sum(r["status"] == "error" for r in records)
    if errors:
        text += f", error {errors}/{total}"
    if any(v == "within one poll" for v in counts):
        unsafe = True
    return ("✗ " if unsafe else "✓ ") + text


def section_matrix(frame: pd.DataFrame, charts: dict | None = None) -> str | None:
    columns = [(key, label) for key, label in FAULTS
               if not frame[(frame.scenario == key[0])].empty]
    if not columns:
        return None
    names = sorted(set(frame.backend), key=backends.rank)
    rows = []
    for backend in names:
        row = [backend]
        for (scenario, variant), _ in columns:
            records = frame[(frame.scenario == scenario) & (frame.backend == backend)
                            & frame.variant.isin([variant, "-"])].to_dict("records")
            row.append(cell(records))
        rows.append(row)
    if charts is not None:
        charts["matrix.png"] = lambda path: matrix_chart([r[0] for r in rows], [label for _, label in columns],
                                                         [r[1:] for r in rows], path)
    return "\n".join([
        "## Every backend under every fault", "",
        "Each cell is the measured outcome with its trial count: ✗ marks a failure of the lock's one job "
        "(another run got in while the holder still believed it held: *lost*; the holder's write accepted after "
        "that: *stale write accepted*; two rebuilds in one company: *merged*), ✓ everything that kept the "
        "company whole (*held*, *stale write rejected* by the fence, *rolled back* with the transaction, "
        "*intact*). *n/a*: the fault does not apply to that backend; *does not run*: the library cannot work "
        "against the lab's servers (*Every outcome* gives both reasons). "
        "Lease and lock TTLs, and the idle guard on the holder's PostgreSQL sessions, are the profile's "
        "`ttl_s`. Reproduce: `lab run --backend all --scenario all`.", "",
        md_table(["backend", *[label for _, label in columns]], rows), "",
        "![the matrix as colours: red failed, green kept the company whole, grey not applicable](matrix.png)", ""])


LEASE_BACKENDS = ["redis", "redlock", "etcd", "redis_fenced", "etcd_fenced", "lease_row"]
POST_LEASE_ROW = ("The holder can lose the lock and keep writing, so the database must check a fencing token. "
                  "A lease row does, at an extra write per company and one hot row. (Reasoned, not run, in the post.)")


def section_why_not_leases(frame: pd.DataFrame) -> str | None:
    """The post's 'Redis, etcd or a lease row' row of Why not just...?, backed by the lease-fault trials."""
    relevant = frame[frame.scenario.isin(["pause", "cut", "restart"]) & frame.backend.isin(LEASE_BACKENDS)]
    if relevant.empty:
        return None
    rows = []
    for backend in [b for b in LEASE_BACKENDS if b in set(relevant.backend)]:
        cells = [cell(relevant[(relevant.backend == backend) & (relevant.scenario == s)].to_dict("records"))
                 for s in ("pause", "cut", "restart")]
        rows.append([backend, *cells])
    return "\n".join([
        "## Why not just Redis, etcd or a lease row?", "",
        f"The post: *{POST_LEASE_ROW}* Measured here: the holder is paused (SIGSTOP), cut off from its lock "
        "service (a blackholing proxy) or sees the lock server restart, for longer than the TTL; a second run "
        "takes the company; the holder then writes. Reproduce: `lab run --backend all --scenario pause,cut,restart`.",
        "", md_table(["backend", "paused past the TTL", "cut past the TTL", "lock server restarted"], rows), "",
        *_token_evidence(relevant)])


def _token_evidence(relevant: pd.DataFrame) -> list[str]:
    """What the fencing tokens were when a fenced backend's lock server restarted."""
    lines = []
    restarted = relevant[(relevant.scenario == "restart") & (relevant.status == "ok")
                         & relevant.backend.isin(["redis_fenced", "etcd_fenced", "lease_row"])]
    for backend, group in restarted.groupby("backend", sort=False):
        pairs = ", ".join(f"{m['holder']['token']} then {m['contender'].get('token')}" for m in group.measures)
        lines.append(f"- {backend} across a restart: holder's token then the next holder's: {pairs}.")
    if lines:
        lines = ["Fencing tokens across a restart (a fence refuses only a token lower than one it has seen; "
                 "*None*: the next run never got the lock):", "", *lines, ""]
    return lines
