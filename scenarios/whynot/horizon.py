"""The xmin horizon of a session lock held across writes: what its open transaction keeps VACUUM from removing.

The post answers "why not SET idle_in_transaction_session_timeout = 0?" with: it works, but it leaves the
transaction open, and an open transaction holds back vacuum. This measures that claim rather than repeating
it. The holder takes its lock under the post's guard (idle_in_transaction_session_timeout), the run rebuilds
companies, and past the guard's timeout the lock session's backend_xmin / backend_xid age and the dead
tuples VACUUM could not remove in the rebuilt table are read. The same run under session_autocommit (the
post's fix) is measured in the same trial as the baseline, and so is an open transaction that has a
transaction id (what any write on such a session gives it), as the reference for what holding the horizon
looks like. Who goes first alternates from one repetition to the next.
"""

from __future__ import annotations

import time

from sqlalchemy import text

import backends
from lab.declarations.post_role import PostRole
from lab.servers.clients import pg_engine
from lab.workload.table import COMPANY_SIZE
from scenarios.base import TrialEnv, release_said
from scenarios.whynot._vacuum import fresh_table, others_held, session_horizon, vacuum
from scenarios.whynot.base import Experiment, is_session_lock_on_postgres

BASELINE = PostRole.METHOD_3  # the post's fix: a session lock that leaves no transaction open


class XminHorizon(Experiment):
    """A session lock held past the guard's timeout, its horizon against session_autocommit's and an open xid's."""

    variants = ("xmin_horizon",)
    reason = "needs a PostgreSQL session lock held across writes"

    def applies(self, backend_cls) -> str | None:
        return None if is_session_lock_on_postgres(backend_cls) else self.reason

    def run(self, env: TrialEnv, variant: str) -> dict:
        guard = {"idle_in_transaction_session_timeout": f"{int(env.params['timeout_s'] * 1000)}ms"}
        baseline = backends.playing(BASELINE)
        order = list(dict.fromkeys([env.spec.backend, baseline]))
        if env.spec.index % 2:
            order.reverse()  # alternate who goes first, repetition by repetition
        runs = {name: _holding_run(env, name, f"h{i}", guard) for i, name in enumerate(order)}
        return {"timeout_s": env.params["timeout_s"], "companies": env.params["companies"],
                "order": order, "backend": runs[env.spec.backend], "baseline": runs[baseline],
                "baseline_backend": baseline, "open_xid": _open_xid_reference(env, guard)}

    def verdict(self, m: dict) -> str:
        if not m["backend"]["held_after"]:
            return "lock session ended by the guard"
        if m["backend"].get("others_held"):
            return "not measured: another session held the horizon too"
        return "holds back vacuum" if m["backend"]["not_removable"] else "holds back nothing"


def _holding_run(env: TrialEnv, name: str, label: str, guard: dict) -> dict:
    """A run of backend `name` takes its lock under the guard, rebuilds every company, and holds past the timeout."""
    p = env.params
    table = fresh_table(env, label, p["companies"])
    holder = env.backend(name, table=table, lock_settings=guard, key=env.key(label))
    try:
        acquired = holder.acquire()
        t0 = time.monotonic()
        results = [holder.rebuild(c, COMPANY_SIZE, label) for c in range(1, p["companies"] + 1)]
        env.wait_until(t0, 2 * p["timeout_s"])  # past the guard's timeout, as a run's long stretch would be
        horizon = session_horizon(env.monitor, holder.lock_pid)
        held_after = holder.held()
        vacuumed = vacuum(env.monitor, table)
        release = release_said(holder)
    finally:
        holder.close()
    return {"backend": name, "acquired": acquired, "held_after": held_after, "release": release,
            "rebuilt": sum(r.outcome == "committed" for r in results), "deleted": sum(r.deleted or 0 for r in results),
            **horizon, **vacuumed, "others_held": others_held(horizon, vacuumed)}


def _open_xid_reference(env: TrialEnv, guard: dict) -> dict:
    """A default connection with the guard set to 0 whose open transaction has a transaction id (one write
    on it, or pg_current_xact_id(), gives it one), while the same rebuilds run: the horizon held."""
    p = env.params
    table = fresh_table(env, "xid", p["companies"])
    engine = pg_engine(env.services.pg(), guard, pool_size=1, max_overflow=0)
    try:
        conn = engine.connect()
        try:
            conn.execute(text("select set_config('idle_in_transaction_session_timeout', '0', false)"))
            conn.execute(text("select pg_current_xact_id()"))
            pid = conn.execute(text("select pg_backend_pid()")).scalar()
            t0 = time.monotonic()
            for company in range(1, p["companies"] + 1):
                with env.writes.begin() as write:
                    table.rebuild(write, company, COMPANY_SIZE, "xid")
            env.wait_until(t0, 2 * p["timeout_s"])  # past the guard's timeout, as the holders wait
            horizon = session_horizon(env.monitor, pid)
            vacuumed = vacuum(env.monitor, table)
        finally:
            conn.invalidate()
            conn.close()
    finally:
        engine.dispose()
    return {"deleted": p["companies"] * COMPANY_SIZE, **horizon, **vacuumed,
            "others_held": others_held(horizon, vacuumed)}
