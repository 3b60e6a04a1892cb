"""A row lock on the company's parent row: what it costs the parent's other writers, and a company with no parent.

The post answers "why not a row lock?" with: it needs a parent row per company. This tests both sides of
that for a backend that locks a parent row (declared by row_lock_strength). fk_child_insert: while a rebuild
holds the company's parent row, another session inserts a child row referencing it; how long it waits (FOR
UPDATE conflicts with the KEY SHARE lock the foreign key check takes, FOR NO KEY UPDATE does not).
no_parent_row: two overlapping rebuilds of a company that has no parent row, with the lock alone
(missing_parent=lock_only: there is nothing to lock, so nothing excludes) and with the parent created
first (the default); only the default form must keep the company whole.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

import backends
from backends.base import describe_error
from lab.declarations.capabilities import Capability
from lab.checkers.measure_level import company_state, company_whole
from lab.checkers.outcomes import Safety
from lab.servers.postgres import sql as pg
from lab.workload.table import COMPANY_SIZE, table_name
from scenarios._two_runs import COMPANY, two_runs
from scenarios.base import TrialEnv
from scenarios.whynot._overlap import hold_run1_at
from scenarios.whynot.base import WaitingExperiment


class RowLocks(WaitingExperiment):
    """A child insert under the parent's row lock (fk_child_insert), and a company with no parent row
    (no_parent_row)."""

    variants = ("fk_child_insert", "no_parent_row")
    requires = frozenset({Capability.PARENT_ROW_LOCK})
    reason = "locks no parent row (declares no row_lock_strength)"

    def run(self, env: TrialEnv, variant: str) -> dict:
        return _child_insert_trial(env) if variant == "fk_child_insert" else _no_parent_trial(env)

    def verdict(self, m: dict) -> str:
        if m["kind"] == "fk_child_insert":
            return "child insert waited" if m["child_waited"] else "child insert did not wait"
        return f"no parent row, lock only: {m['lock_only']['company']}; parent created first: " \
               f"{m['create']['company']}"

    def safety(self, m: dict) -> Safety:
        """Only the default form (the parent created first) promises a whole company; the lock alone is
        measured to show it does not."""
        if m["kind"] == "fk_child_insert":
            return Safety.SAFE
        return Safety.SAFE if m["create"]["whole"] else Safety.UNSAFE


# --- a child row inserted under the parent's lock -------------------------------------------------------

def _child_table(env: TrialEnv, parent: str) -> str:
    name = table_name(f"{env.run_id}_{env.spec.id}_child")
    with env.monitor.begin() as conn:
        conn.execute(text(f"drop table if exists {name}"))
        conn.execute(text(f"create table {name} (scope text not null, company_id int not null, note text, "
                          f"foreign key (scope, company_id) references {parent} (scope, company_id))"))
    return name


def _insert_child(env: TrialEnv, child: str, key: str, limit_ms: int, seen: dict) -> dict:
    """Insert one child row referencing the company; how long it took and how it ended."""
    start = time.monotonic()
    try:
        with env.writes.begin() as conn:
            seen["pid"] = pg.backend_pid(conn)
            conn.execute(text(f"set local lock_timeout = {int(limit_ms)}"))
            conn.execute(text(f"insert into {child} values (:s, :c, 'child')"), {"s": key, "c": COMPANY})
        outcome, error = "committed", None
    except SQLAlchemyError as exc:
        outcome, error = "failed", describe_error(exc)
    return {"outcome": outcome, "error": error, "seconds": round(time.monotonic() - start, 4),
            "ended_at": time.monotonic()}


def _wait_event(monitor, pid: int) -> str | None:
    """'Lock/tuple', 'Lock/transactionid' ... while session pid waits on a lock, else None."""
    with monitor.connect() as conn:
        row = conn.execute(text("select wait_event_type, wait_event from pg_stat_activity where pid = :p"),
                           {"p": pid}).first()
    return f"{row[0]}/{row[1]}" if row is not None and row[0] == "Lock" else None


def _child_insert_trial(env: TrialEnv) -> dict:
    cls = backends.load(env.spec.backend)
    hold = env.params["hold_s"]
    table = env.table()
    table.seed(env.writes, COMPANY, COMPANY_SIZE)
    child = _child_table(env, cls.parent_table)
    key = env.key()
    holder = env.backend(table=table, key=key)
    try:
        first = holder.rebuild(COMPANY, COMPANY_SIZE, "first")  # the parent row exists, committed, from here on
        if first.outcome != "committed":
            raise RuntimeError(f"the first rebuild did not commit: {first.error}")
        idle = _insert_child(env, child, key, int(hold * 4000), {})  # nothing held: the floor
        during, waiting, seen, result = _insert_while_held(env, holder, child, key)
    finally:
        holder.close()
    waited = waiting is not None or during["seconds"] >= hold / 2
    return {"lock_strength": cls.row_lock_strength, "hold_s": hold,
            "child_idle": {k: v for k, v in idle.items() if k != "ended_at"},
            "child_during": {k: v for k, v in during.items() if k != "ended_at"},
            "child_wait_event": waiting, "child_waited": waited,
            # Ended only once the holder had committed: the insert was held up by the rebuild, not slow by itself.
            "child_ended_after_holder_commit": during["ended_at"] >= seen.get("holder_committed_at", float("inf")),
            "holder": result.outcome}


def _insert_while_held(env: TrialEnv, holder, child: str, key: str) -> tuple:
    """A rebuild holds the parent row for hold_s while a child insert runs: the insert, the lock it was seen
    waiting on (None: never seen waiting), when the holder committed, and the rebuild's result."""
    hold = env.params["hold_s"]
    locked, seen = threading.Event(), {}

    def hold_parent(name, conn):
        if name == "after_lock":
            locked.set()
            env.pause(hold)  # the rebuild keeps the parent row while the child insert runs
        elif name == "after_commit":
            seen["holder_committed_at"] = time.monotonic()

    with ThreadPoolExecutor(2) as pool:
        rebuild = pool.submit(holder.rebuild, COMPANY, COMPANY_SIZE, "holder", hold_parent)
        if not locked.wait(30):
            raise RuntimeError("the rebuild never locked the parent row")
        insert = pool.submit(_insert_child, env, child, key, int(hold * 4000), seen)
        waiting, deadline = None, time.monotonic() + hold / 2
        while waiting is None and time.monotonic() < deadline and not insert.done():
            if seen.get("pid") is not None:
                waiting = _wait_event(env.monitor, seen["pid"])
            env.pause(0.01)
        during = insert.result(timeout=30 + 4 * hold)
        result = rebuild.result(timeout=30 + 4 * hold)
    return during, waiting, seen, result


# --- a company with no parent row -----------------------------------------------------------------------

def _parents(env: TrialEnv, parent: str) -> int:
    with env.monitor.connect() as conn:
        return conn.execute(text(f"select count(*) from {parent} where scope = :s and company_id = :c"),
                            {"s": env.key(), "c": COMPANY}).scalar_one()


def _no_parent_trial(env: TrialEnv) -> dict:
    """Two overlapping rebuilds of a company with no parent row: the lock alone, then the parent created first.

    lock_only runs first: it never creates a parent, so the second form also starts without one."""
    cls = backends.load(env.spec.backend)
    phases = {}
    for policy in ("lock_only", "create"):
        before = _parents(env, cls.parent_table)
        if before:
            raise RuntimeError(f"the company already has a parent row before the {policy} phase")
        result = two_runs(env, hold_run1_at(env), options={"missing_parent": policy})
        m = result.measures()
        phases[policy] = {"parent_rows_before": before, "parent_rows_after": _parents(env, cls.parent_table),
                          "runs": m["runs"], "rows_seen": m["rows_seen"], "rows_final": m["rows_final"],
                          "runs_in_final": m["runs_in_final"],
                          "company": company_state(COMPANY_SIZE, m["rows_final"], m["runs_in_final"]),
                          "whole": company_whole(COMPANY_SIZE, m["rows_final"], m["runs_in_final"])}
    return {"lock_strength": cls.row_lock_strength, "hold_s": env.params["hold_s"], **phases}
