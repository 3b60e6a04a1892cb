"""Report section: the post's cases on MariaDB's GET_LOCK, beside the post's figures and PostgreSQL's measured here.

A lock that is one of the post's methods on MariaDB declares it (backends/base.py analogue_of; meta.json keeps it
as "analogues"), so its rows are found by that declaration, as the post's own methods are by their role. Every
cell is measured; whether case A reproduces on MariaDB is computed from the trials, never written in.
"""

from __future__ import annotations

import pandas as pd

from lab.checkers.outcomes import outcome_text
from lab.measures.kinds import Measured
from lab.declarations.post_role import PostRole
from lab.report import published
from lab.report.common import backend_with_role, md_table, ok_trials
from lab.report.sections import RunView, section
from lab.report.session import on_server

METHODS = (PostRole.METHOD_1, PostRole.METHOD_2, PostRole.METHOD_3)
# The cases scenario's variants, in the order a reader meets them, as this table words them.
ROWS = {
    "idle_in_transaction": "idle in a transaction past the guard",
    "read_then_idle_in_transaction": "one table read on the lock's session, then idle in a transaction past it",
    "query_then_idle_in_transaction": "one more query (select 1), then idle in a transaction past the guard",
    "idle_write_transaction": "one table read, then idle past the guard of transactions that wrote",
    "idle_session": "idle outside a transaction past the guard of idle sessions",
}


def analogues(meta: dict) -> dict[str, PostRole]:
    """Backend name -> the post's method it is on another server, as the run recorded it."""
    known = {role.value: role for role in PostRole}
    return {name: known[role] for name, role in (meta.get("analogues") or {}).items() if role in known}


def analogue_of(meta: dict, role: PostRole) -> str | None:
    """The MariaDB backend that is this method of the post's, among the run's (None: not in the run)."""
    found = sorted(name for name, declared in analogues(meta).items() if declared == role)
    return found[0] if found else None


def cell(frame: pd.DataFrame, kind: Measured, backend: str | None, variant: str) -> list[dict]:
    """The trial records of one cell of the scenario measuring this kind (every status: an n/a or an error shows
    as such)."""
    if backend is None:
        return []
    return frame[(frame.measured == kind) & (frame.backend == backend) & (frame.variant == variant)].to_dict(
        "records")


def guard_of(records: list[dict]) -> str:
    """The guard the cell's trials set, as they recorded it (its setting name and value)."""
    for record in records:
        if record["status"] == "ok":
            measures = record["measures"]
            unit = " s" if isinstance(measures["timeout_s"], (int, float)) else ""
            return f"{measures['setting']} {measures['timeout_s']:g}{unit}"
    return "-"


def with_guard(records: list[dict]) -> str:
    """A cell's outcome, with the guard its trials set where any ran; 'not run' for a cell with no trials."""
    if not records:
        return "not run"
    guard = guard_of(records)
    return outcome_text(records) + ("" if guard == "-" else f" ({guard})")


def lost_count(records: list[dict]) -> tuple[int, int]:
    """(trials that lost the lock, ok trials) of a cases cell."""
    ok = [r for r in records if r["status"] == "ok"]
    return sum(r["verdict"] == "lost" for r in ok), len(ok)


def case_a_sentence(frame: pd.DataFrame, meta: dict) -> str | None:
    """Whether the post's case A reproduces on MariaDB, computed from the trials, with the figures beside it."""
    mine = analogue_of(meta, PostRole.METHOD_1)
    plain = cell(frame, Measured.POST_CASE, mine, "idle_in_transaction")
    lost, n = lost_count(plain)
    if not n:
        return None
    after_read, read_n = lost_count(cell(frame, Measured.POST_CASE, mine, "read_then_idle_in_transaction"))
    theirs = backend_with_role(frame, PostRole.METHOD_1)
    pg_lost, pg_n = lost_count(cell(frame, Measured.POST_CASE, theirs, "idle_in_transaction"))
    if lost == n:
        verdict = f"**Case A reproduces on MariaDB**: `{mine}` lost its lock in {lost} of {n} trials"
    elif lost == 0:
        verdict = (f"**Case A does not reproduce on MariaDB**: `{mine}` kept its lock in {n} of {n} trials, because "
                   f"SELECT GET_LOCK() opens no transaction, so the guard has nothing to end")
    else:
        verdict = f"**Case A varies on MariaDB**: `{mine}` lost its lock in {lost} of {n} trials"
    figures = ["the post: lost (its t=5 s probe got the lock; 40 of 40 timing trials)"]
    if pg_n:
        figures.append(f"PostgreSQL here (`{theirs}`): lost in {pg_lost} of {pg_n}")
    if read_n:
        figures.append(f"the same MariaDB lock after one read of a table on its session: lost in {after_read} of "
                       f"{read_n}")
    return f"{verdict} ({'; '.join(figures)})."


def timing_lines(frame: pd.DataFrame, meta: dict) -> list[str]:
    """The timing runs of the MariaDB methods beside the post's 20 of 20 per row."""
    lines = []
    for role in METHODS:
        mine = analogue_of(meta, role)
        for trigger in ("cron", "event"):
            records = [r for r in cell(frame, Measured.GUARD_TIMING, mine, trigger) if r["status"] == "ok"]
            post = published.TIMING.get((role, trigger))
            if not records or post is None:
                continue
            lost = sum(r["verdict"] == "lost" for r in records)
            lines.append(f"- method {role.method}, {trigger}: a short run got in during {lost} of {len(records)} "
                         f"trials on MariaDB (`{mine}`); the post, on PostgreSQL: {post[0]} of {post[1]}.")
    return lines


@section(45)
def section_mariadb_cases(run: RunView) -> str | None:
    frame = run.frame
    ok = on_server(ok_trials(frame, Measured.POST_CASE), "mariadb")
    if ok.empty:
        return None
    rows = []
    for role in METHODS:
        mine, theirs = analogue_of(run.meta, role), backend_with_role(frame, role)
        for variant, words in ROWS.items():
            ours = cell(frame, Measured.POST_CASE, mine, variant)
            if not ours:
                continue
            pg = cell(frame, Measured.POST_CASE, theirs, variant)
            letter = next((r["measures"].get("case") for r in ours if r["status"] == "ok"), None)
            post = published.SAME_FAULTS.get(variant, {}).get(role, "-")
            rows.append([f"{role.method}{f' ({letter})' if letter else ''}", words, post, with_guard(pg),
                         with_guard(ours)])
        killed = cell(frame, Measured.CALIBRATION, mine, "terminate")
        if killed:
            pg = cell(frame, Measured.CALIBRATION, theirs, "terminate")
            rows.append([str(role.method), "the lock's session killed (pg_terminate_backend / KILL CONNECTION)",
                         published.SAME_FAULTS["terminate"].get(role, "-"), outcome_text(pg) if pg else "not run",
                         outcome_text(killed)])
    out = ["## The post's cases on MariaDB, beside PostgreSQL's", "",
           "MariaDB's GET_LOCK belongs to its session, as a session advisory lock does, and MariaDB has the post's "
           "guard under other names: idle_transaction_timeout (and idle_write_transaction_timeout, for transactions "
           "that wrote), and wait_timeout for every idle session, in a transaction or not. Each row holds the lock "
           "the post's way on PyMySQL through SQLAlchemy (autocommit off, commit after acquiring, AUTOCOMMIT) under "
           "one guard set on the lock's own session, probed at t=1 and t=5 in thirds of the timeout as the post's "
           "cases are; *lost*: a second session got the lock while the holder believed it held. Reproduce: "
           "`lab run --backend session,session_commit,session_autocommit,mariadb_session,mariadb_session_commit,"
           "mariadb_session_autocommit --scenario cases,calibrate`.", ""]
    sentence = case_a_sentence(frame, run.meta)
    if sentence is not None:
        out += [sentence, ""]
    out += [md_table(["method (case)", "the lock's session", "post", "PostgreSQL, measured", "MariaDB, measured"],
                     rows), ""]
    timing = timing_lines(frame, run.meta)
    if timing:
        out += ["The timing runs (a long run holding the lock under the guard, short runs trying on a cron grid or "
                "at random events):", "", *timing, ""]
    return "\n".join(out)
