"""One giant transaction killed halfway, against one transaction per company killed at the same point.

The post answers "why not one giant transaction for the whole run?" with: it holds a transaction id for
hours and loses all work on failure. This measures both halves. A backend that can rebuild several companies
in one transaction and keeps no right between writes (a lock inside the write transaction, xact's, or none
at all, none's, which is what the cost table's "one transaction for all" runs on) rebuilds every company in
ONE transaction while other traffic churns a second table, and is killed (pg_terminate_backend, confirmed)
halfway, transaction open. Its xid age over the run, the dead tuples VACUUM could not remove in the churned
table, and the companies committed afterwards are read; the same run with one transaction per company (the
backend's own rebuild), killed inside company N/2+1's transaction, is measured in the same trial as the
baseline. The kill is the one fault of the whynot scenario, so its trials are exercised; a kill that cannot
be confirmed makes the trial an error, never a verdict.
"""

from __future__ import annotations

from sqlalchemy import text

from lab.declarations.capabilities import Capability
from lab.checkers.outcomes import NotRun, Safety
from lab.faults import FaultNotConfirmed, terminate_confirmed
from lab.servers.postgres import sql as pg
from lab.workload.table import COMPANY_SIZE, CompanyTable
from scenarios.base import TrialEnv
from scenarios.whynot._vacuum import fresh_table, others_held, session_horizon, vacuum
from scenarios.whynot.base import Experiment

SHAPES = ("giant", "per_company")  # every company in one transaction; one transaction per company


class GiantTransaction(Experiment):
    """Every company in one transaction against one per company, each killed halfway, in alternating order."""

    variants = ("giant_transaction",)
    reason = ("holds its right between writes on a connection of its own, or cannot write several companies in "
              "one transaction (no rebuild_batch)")

    def applies(self, backend_cls) -> str | None:
        """Its lock, if any, must live in the write transaction: one transaction for all the run's companies is
        then its own shape, where a right held between writes would keep a connection of its own."""
        batches = Capability.BATCH_REBUILD in backend_cls.capabilities
        if not batches or backend_cls.holds_across_writes():
            return self.reason
        if backend_cls.writes_to != "postgres":  # the question applies; the lab's figures are PostgreSQL's
            return NotRun(f"its figures are PostgreSQL's (transaction-id age, the VACUUM horizon), and this lock's "
                          f"writes are on {backend_cls.writes_to}")
        return None

    def run(self, env: TrialEnv, variant: str) -> dict:
        order = list(SHAPES)
        if env.spec.index % 2:
            order.reverse()
        runs = {shape: _killed_run(env, shape, f"g{i}") for i, shape in enumerate(order)}
        return {"companies": env.params["giant_companies"], "rows": COMPANY_SIZE, "order": order, "exercised": True,
                **runs}

    def verdict(self, m: dict) -> str:
        giant, each = m["giant"], m["per_company"]
        if giant.get("others_held") or each.get("others_held"):
            horizon = "not compared: another session held the horizon too"
        elif giant["not_removable"] > each["not_removable"]:
            horizon = "held back more dead rows"
        else:
            horizon = "held back no more dead rows"
        return (f"killed halfway: one transaction lost {giant['lost']} of {giant['written']} companies written, "
                f"one per company lost {each['lost']} of {each['written']}; {horizon}")

    def safety(self, m: dict) -> Safety:
        """A kill mid-transaction must leave every company whole either way."""
        return Safety.SAFE if all(m[shape]["companies_whole"] for shape in SHAPES) else Safety.UNSAFE


def _churn(env: TrialEnv, churn: CompanyTable, company: int) -> int:
    """Other traffic: rebuild one company of the churned table in a transaction of its own, committed."""
    with env.writes.begin() as conn:
        return churn.rebuild(conn, company, COMPANY_SIZE, "churn")


def _xid_age(monitor, pid: int) -> int | None:
    with monitor.connect() as conn:
        return conn.execute(text("select age(backend_xid) from pg_stat_activity where pid = :p"), {"p": pid}).scalar()


def _committed(monitor, table: CompanyTable, run_id: str, companies: int) -> dict:
    """Companies the run's rows hold now, and whether every company is whole (its rows from one rebuild only)."""
    with monitor.connect() as conn:
        committed = conn.execute(text(f"select count(distinct company_id) from {table.name} where run_id = :r"),
                                 {"r": run_id}).scalar()
        torn = conn.execute(text(f"select count(*) from (select company_id from {table.name} group by company_id "
                                 f"having count(*) <> :n or count(distinct run_id) <> 1) t"), {"n": COMPANY_SIZE}
                            ).scalar()
        present = conn.execute(text(f"select count(distinct company_id) from {table.name}")).scalar()
    return {"committed": committed, "companies_whole": torn == 0 and present == companies}


def _killed_run(env: TrialEnv, shape: str, label: str) -> dict:
    """A run of the trial's backend rebuilds every company, as one transaction or one per company, while other
    traffic churns a second table one company per company written; it is killed halfway, inside a transaction.

    The giant transaction is killed once it has written N/2 companies; the per-company run inside company
    N/2+1's transaction, after its writes and before its COMMIT. Both are measured at that moment, from inside
    the open transaction (the rebuild's before_commit point), before the kill."""
    n = env.params["giant_companies"]
    stop = n // 2 if shape == "giant" else n // 2 + 1
    table, churn = fresh_table(env, label, n), fresh_table(env, f"{label}_churn", n)
    run_id = f"{shape}-{env.spec.index}"
    seen: dict = {"written": 0, "churned": 0, "churned_at_begin": 0, "xid_ages": []}

    def point(name, conn):
        if name == "begin":
            seen["churned_at_begin"] = seen["churned"]
        if name != "before_commit":
            return
        seen["written"] += 1
        seen["churned"] += _churn(env, churn, seen["written"])
        pid = pg.backend_pid(conn)
        seen["xid_ages"].append(_xid_age(env.monitor, pid))
        if seen["written"] == stop:
            horizon = session_horizon(env.monitor, pid)
            vacuumed = vacuum(env.monitor, churn)
            seen["at_kill"] = {**horizon, **vacuumed, "others_held": others_held(horizon, vacuumed),
                               "churned_while_open": seen["churned"] - seen["churned_at_begin"]}
            seen["kill"] = terminate_confirmed(env.monitor, pid)  # FaultNotConfirmed: the trial errors

    backend = env.backend(table=table, key=env.key(label))
    try:
        results = _rebuild_until_killed(backend, shape, n, run_id, point, seen)
    finally:
        backend.close()
    killed = results[-1]
    if "kill" not in seen:
        raise FaultNotConfirmed(f"the {shape} run never reached its kill point: {killed.outcome} {killed.error}")
    if killed.outcome == "committed" or killed.resolved == "committed":
        raise FaultNotConfirmed(f"the {shape} run's killed transaction committed: the kill did not strike it")
    after = _committed(env.monitor, table, run_id, n)
    return {"transactions": len(results), "written": seen["written"], "committed": after["committed"],
            "lost": seen["written"] - after["committed"], "not_started": n - seen["written"],
            "companies_whole": after["companies_whole"], "churned": seen["churned"], "xid_ages": seen["xid_ages"],
            **seen["at_kill"],
            "kill": {**seen["kill"], "client_outcome": killed.outcome, "client_error": killed.error,
                     "client_sqlstate": killed.sqlstate, "resolved": killed.resolved}}


def _rebuild_until_killed(backend, shape: str, n: int, run_id: str, point, seen: dict) -> list:
    """The run's rebuilds in its shape, each with the kill point: one batch of every company, or one company
    after another until the kill; nothing starts after the killed one."""
    if shape == "giant":
        return [backend.rebuild_batch(list(range(1, n + 1)), COMPANY_SIZE, run_id, point)]
    results = []
    for company in range(1, n + 1):
        results.append(backend.rebuild(company, COMPANY_SIZE, run_id, point))
        if "kill" in seen:
            break  # the run was killed: nothing after it starts
    return results
