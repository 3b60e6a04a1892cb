"""The post's "Why not just...?" alternatives, measured: what each one costs, and where it stops holding.

Each variant runs for the backends whose declarations make it apply, never for a list of names:

- xmin_horizon (a PostgreSQL session lock held across writes): the holder takes its lock under the
  post's guard (idle_in_transaction_session_timeout), the run rebuilds companies, and past the guard's
  timeout the lock session's backend_xmin / backend_xid age and the dead tuples VACUUM could not remove
  in the rebuilt table are read. The same run under session_autocommit (the post's fix) is measured in
  the same trial as the baseline, and so is an open transaction that has a transaction id (what any
  write on such a session gives it) as the reference for what holding the horizon looks like.
- guard_off_role (a backend that declares it can turn the guard off on a role, guard_off_on): the guard set
  on the database (ALTER DATABASE, as an owner would) and turned off on the holder's role (ALTER ROLE ... SET
  idle_in_transaction_session_timeout = 0); whether the lock outlives the guard, with a session of the lab's
  own user under the same database guard, a lock taken and its transaction left open, as the control the guard
  ends. Only on a PostgreSQL the lab started (it alters the database and creates a role); otherwise skipped.
- giant_transaction (a backend that can rebuild several companies in one transaction and keeps no right
  between writes: a lock inside the write transaction, xact's, or none at all, none's, which is what the cost
  table's "one transaction for all" runs on): a run rebuilds every company in ONE transaction while other
  traffic churns a second table, and is killed (pg_terminate_backend, confirmed) halfway, transaction open.
  Its xid age over the run, the dead tuples VACUUM could not remove in the churned table, and the companies
  committed afterwards are read; the same run with one transaction per company (the backend's own rebuild),
  killed inside company N/2+1's transaction, is measured in the same trial as the baseline.
- throughput (a PostgreSQL session lock held across writes, which may tie the run's writes to one session,
  or a backend that hands companies out): one run's workers (1, 2, 4) rebuild the same number of companies;
  companies per second, against xact with the same workers in the same trial. A backend that hands
  companies out (rebuild_next) is asked for its next company instead of walking a list.
- fk_child_insert (a backend that locks a parent row, declared by row_lock_strength): while a rebuild
  holds the company's parent row, another session inserts a child row referencing it; how long it waits.
- no_parent_row (the same backends): two overlapping rebuilds of a company that has no parent row, with
  the lock alone (missing_parent=lock_only) and with the parent created first (the default).
- backstop_loser (a backend with a marker_table): two overlapping rebuilds; what the second one sees.
- same_inputs / different_inputs (a backend with a natural_key): two overlapping rebuilds with the same
  inputs, and with each run's own (the post's overlap), held after the delete and before the commit.
- queue_exclusion (a backend that hands companies out): runs pull companies until none is left; whether
  any company went to two runs; and a second run asking for a company the first holds, before and after
  the company's job row exists.

The trials run one at a time: VACUUM's horizon is the whole server's, and throughput wants the machine.
"""

from __future__ import annotations

import random
import re
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

import backends
from backends.base import describe_error
from backends.session_guard_off import GUARD, guard_left_to_server
from lab.capabilities import Capability
from lab.faults import FaultNotConfirmed, terminate_confirmed
from lab.harness.checkers import company_state, company_whole
from lab.harness.outcomes import Safety
from lab.harness.workload import COMPANY_SIZE, CompanyTable, table_name
from lab.servers import pg
from lab.servers.clients import pg_engine
from lab.servers.drivers import DEFAULT as DEFAULT_DRIVER
from scenarios._two_runs import COMPANY, two_runs
from scenarios.base import ALONE, Scenario, Skip, TrialEnv, release_said

HORIZON_BASELINE = "session_autocommit"  # the post's fix: a session lock that leaves no transaction open
THROUGHPUT_BASELINE = "xact"  # the post's robust fix: a lock per company inside its write transaction
WORKERS = (1, 2, 4)
QUEUE_RUNS = 3

_TUPLES = re.compile(r"tuples: (\d+) removed, (\d+) remain, (\d+) are dead but not yet removable")
_CUTOFF = re.compile(r"removable cutoff: (\d+), which was (\d+) XIDs old")


def _is_session_lock_on_postgres(cls) -> bool:
    return Capability.SESSION_LOCK in cls.capabilities and cls.lock_service == "postgres"


def _locks_parent_row(cls) -> bool:
    return Capability.PARENT_ROW_LOCK in cls.capabilities


def _hands_out(cls) -> bool:
    return Capability.QUEUE in cls.capabilities


def _guard_off_on_role(cls) -> bool:
    return Capability.GUARD_OFF_ON_ROLE in cls.capabilities


def _batches_without_run_lock(cls) -> bool:
    """Can write several companies in one transaction (rebuild_batch) and holds no right between writes: its
    lock, if any, lives in that transaction, so one transaction for all the run's companies is its own shape."""
    return Capability.BATCH_REBUILD in cls.capabilities and not cls.holds_across_writes()


# variant -> (does it apply to this backend class, the reason when it does not)
APPLIES = {
    "xmin_horizon": (_is_session_lock_on_postgres, "needs a PostgreSQL session lock held across writes"),
    "guard_off_role": (_guard_off_on_role, "does not declare it turns the guard off on a role (guard_off_on)"),
    "giant_transaction": (_batches_without_run_lock,
                          "holds its right between writes on a connection of its own, or cannot write several "
                          "companies in one transaction (no rebuild_batch)"),
    "throughput": (lambda cls: _is_session_lock_on_postgres(cls) or _hands_out(cls),
                   "neither a PostgreSQL session lock held across writes nor a queue (a lock per company "
                   "costs what xact does: see the cost table)"),
    "fk_child_insert": (_locks_parent_row, "locks no parent row (declares no row_lock_strength)"),
    "no_parent_row": (_locks_parent_row, "locks no parent row (declares no row_lock_strength)"),
    "backstop_loser": (lambda cls: Capability.UNIQUE_MARKER in cls.capabilities, "keeps no unique marker row"),
    "same_inputs": (lambda cls: Capability.NATURAL_KEY in cls.capabilities, "writes no upsert on a natural key"),
    "different_inputs": (lambda cls: Capability.NATURAL_KEY in cls.capabilities,
                         "writes no upsert on a natural key"),
    "queue_exclusion": (_hands_out, "hands out no companies (no rebuild_next)"),
}


class WhyNot(Scenario):
    name = "whynot"
    lane = ALONE  # throughput wants the machine, and VACUUM's horizon is the whole server's
    summary = ("the post's Why-not alternatives measured: xmin horizon with the guard off, one giant transaction "
               "killed halfway, workers on the lock's connection, FK inserts under a row lock, the unique backstop's "
               "loser, idempotent inputs, a queue")
    variants = tuple(APPLIES)
    params = {
        "quick": {"trials": 1, "parallel": 1, "timeout_s": 0.5, "companies": 12, "hold_s": 0.4,
                  "giant_companies": 8, "throughput_companies": 32, "throughput_reps": 3, "queue_companies": 24},
        "default": {"trials": 3, "parallel": 1, "timeout_s": 2.0, "companies": 40, "hold_s": 1.0,
                    "giant_companies": 40, "throughput_companies": 200, "throughput_reps": 5, "queue_companies": 120},
    }

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        applies, reason = APPLIES[variant]
        return None if applies(backend_cls) else reason

    def pg_sessions(self, backend_cls, profile: str) -> int:
        """Four workers' write sessions, the lock's, the monitor's (VACUUM, pg_stat_activity) and an observer."""
        return max(WORKERS) + 3

    def trial_seconds(self, profile: str) -> float:
        p = self.profile_params(profile)
        return 1.0 + 4 * p["timeout_s"] + 2 * p["hold_s"]

    def run_trial(self, env: TrialEnv) -> dict:
        return {"xmin_horizon": horizon_trial, "guard_off_role": guard_role_trial, "giant_transaction": giant_trial, "throughput": throughput_trial,
                "fk_child_insert": fk_trial, "no_parent_row": no_parent_trial, "backstop_loser": backstop_trial,
                "same_inputs": lambda e: inputs_trial(e, same=True),
                "different_inputs": lambda e: inputs_trial(e, same=False),
                "queue_exclusion": queue_trial}[env.spec.variant](env)

    def verdict(self, m: dict) -> str:
        kind = m["kind"]
        if kind == "xmin_horizon":
            if not m["backend"]["held_after"]:
                return "lock session ended by the guard"
            return "holds back vacuum" if m["backend"]["not_removable"] else "holds back nothing"
        if kind == "guard_off_role":
            if m["control"]["state"] != "gone":
                return "the database's guard ended nothing: not shown"
            return "survived the database's guard" if m["holder"]["held_after"] else "lock session ended by the guard"
        if kind == "giant_transaction":
            giant, each = m["giant"], m["per_company"]
            horizon = "held back more" if giant["not_removable"] > each["not_removable"] else "held back no more"
            return (f"killed halfway: one transaction lost {giant['lost']} of {giant['written']} companies written, "
                    f"one per company lost {each['lost']} of {each['written']}; {horizon} dead rows")
        if kind == "throughput":
            # The structure first (how many writes were in flight at once), then the speed: apart only when
            # the ranges of paired speedups do not overlap, since closer than that is noise.
            top = m["backend"][-1]
            shape = ("serialized" if top["in_flight_peak"] == 1 else "parallel") + \
                f": {top['in_flight_peak']} of {top['workers']} workers' writes in flight at once"
            mine, base = m["speedups"], m["baseline_speedups"]
            speed = ("scales less than xact" if max(mine) < min(base) else
                     "scales more than xact" if min(mine) > max(base) else "scales like xact, within noise")
            return f"{shape}; {speed}"
        if kind == "fk_child_insert":
            return "child insert waited" if m["child_waited"] else "child insert did not wait"
        if kind == "no_parent_row":
            return f"no parent row, lock only: {m['lock_only']['company']}; parent created first: " \
                   f"{m['create']['company']}"
        if kind == "backstop_loser":
            return m["loser_saw"]
        if kind in ("same_inputs", "different_inputs"):
            if m["same"]:
                return "same rows" if m["identical"] else "rows differ"
            if not m["last_committer_won"]:
                return "rows of neither run alone"
            lost = sum(not kept for kept in m["newest_kept"].values())
            return (f"last committer's rows kept; the newer run's output overwritten in {lost} of "
                    f"{len(m['newest_kept'])} overlaps")
        if kind == "queue_exclusion":
            return "a company went to two runs" if m["duplicates"] else "no company went to two runs"
        raise ValueError(kind)

    def safety(self, m: dict, verdict: str) -> Safety:
        """Unsafe only where two runs rebuilt one company at once as the backend is configured by default."""
        kind = m["kind"]
        if kind == "no_parent_row":
            return Safety.SAFE if m["create"]["whole"] else Safety.UNSAFE
        if kind == "backstop_loser":
            return Safety.SAFE if m["whole"] and not m["torn"] else Safety.UNSAFE
        if kind == "giant_transaction":  # a kill mid-transaction must leave every company whole either way
            whole = all(m[shape]["companies_whole"] for shape in GIANT_SHAPES)
            return Safety.SAFE if whole else Safety.UNSAFE
        if kind == "queue_exclusion":
            pairs = [m["second_asks"], m["second_asks_new_job"]]
            whole = m["intact"] and all(p["whole"] for p in pairs)
            return Safety.UNSAFE if m["duplicates"] or not whole else Safety.SAFE
        return Safety.SAFE

    def exercised(self, m: dict) -> bool | None:
        # Only giant_transaction has a fault (a confirmed kill, which ends the transaction its lock lives in);
        # the others measure costs and edges, not a lock taken away.
        return m.get("exercised")


# --- xmin horizon ---------------------------------------------------------------------------------------

def vacuum(monitor, table: CompanyTable) -> dict:
    """VACUUM (VERBOSE) the table: what it removed and what it had to keep, in its own words."""
    with monitor.connect() as conn:
        dbapi = conn.connection.dbapi_connection
        del dbapi.notices[:]
        cursor = dbapi.cursor()  # psycopg2 keeps the server's INFO lines on the connection for a plain cursor
        try:
            cursor.execute(f"vacuum (verbose) {table.name}")
        finally:
            cursor.close()
        said = "".join(dbapi.notices)
    tuples, cutoff = _TUPLES.search(said), _CUTOFF.search(said)
    return {"removed": int(tuples.group(1)) if tuples else None,
            "not_removable": int(tuples.group(3)) if tuples else None,
            "cutoff_xids_old": int(cutoff.group(2)) if cutoff else None}


def session_horizon(monitor, pid: int | None) -> dict:
    """The session's state and how many transactions old its xmin and its own xid are (None: it holds none)."""
    if pid is None:
        return {"state": None, "xmin_age": None, "xid_age": None}
    with monitor.connect() as conn:
        row = conn.execute(text("select state, age(backend_xmin), age(backend_xid) from pg_stat_activity "
                                "where pid = :p"), {"p": pid}).first()
    if row is None:
        return {"state": "gone", "xmin_age": None, "xid_age": None}
    return {"state": row[0], "xmin_age": row[1], "xid_age": row[2]}


def _fresh_table(env: TrialEnv, label: str, companies: int) -> CompanyTable:
    table = env.table(label)
    table.fill(env.writes, range(1, companies + 1), COMPANY_SIZE)
    vacuum(env.monitor, table)  # start from a table with nothing dead in it
    return table


def _holding_run(env: TrialEnv, name: str, label: str, guard: dict) -> dict:
    """A run of backend `name` takes its lock under the guard, rebuilds every company, and holds past the timeout."""
    p = env.params
    table = _fresh_table(env, label, p["companies"])
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
            **horizon, **vacuumed}


def _open_xid_reference(env: TrialEnv, guard: dict) -> dict:
    """A default connection with the guard set to 0 whose open transaction has a transaction id (one write
    on it, or pg_current_xact_id(), gives it one), while the same rebuilds run: the horizon held."""
    p = env.params
    table = _fresh_table(env, "xid", p["companies"])
    engine = pg_engine(env.services.pg_url, guard, pool_size=1, max_overflow=0)
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
    return {"deleted": p["companies"] * COMPANY_SIZE, **horizon, **vacuumed}


def horizon_trial(env: TrialEnv) -> dict:
    guard = {"idle_in_transaction_session_timeout": f"{int(env.params['timeout_s'] * 1000)}ms"}
    order = list(dict.fromkeys([env.spec.backend, HORIZON_BASELINE]))
    if env.spec.index % 2:
        order.reverse()  # alternate who goes first, repetition by repetition
    runs = {name: _holding_run(env, name, f"h{i}", guard) for i, name in enumerate(order)}
    return {"kind": "xmin_horizon", "timeout_s": env.params["timeout_s"], "companies": env.params["companies"],
            "order": order, "backend": runs[env.spec.backend], "baseline": runs[HORIZON_BASELINE],
            "baseline_backend": HORIZON_BASELINE, "open_xid": _open_xid_reference(env, guard)}


# --- the guard off on a role ----------------------------------------------------------------------------

_GUARD_IN_FORCE = text(f"select setting, source from pg_settings where name = '{GUARD}'")
_TRY_LOCK = text("select pg_try_advisory_lock(hashtextextended(:k, 0)), pg_backend_pid()")


def _database_guard(env: TrialEnv, value: str | None) -> None:
    """Set the guard on the database (new sessions that do not set it get it), or reset it (value None)."""
    database = env.services.pg_url.database
    with env.monitor.connect() as conn:
        if value is None:
            conn.execute(text(f'alter database "{database}" reset {GUARD}'))
        else:
            conn.execute(text(f"alter database \"{database}\" set {GUARD} = '{value}'"))


def _role_settings(env: TrialEnv, role: str) -> list[str]:
    """What pg_db_role_setting keeps for the role (in any database), as lab doctor reads it."""
    with env.monitor.connect() as conn:
        rows = conn.execute(text("select s.setconfig from pg_db_role_setting s join pg_roles r on r.oid = s.setrole "
                                 "where r.rolname = :r"), {"r": role}).scalars()
        return [setting for config in rows for setting in config]


def guard_role_trial(env: TrialEnv) -> dict:
    """The guard on the database, off on the holder's role: the lock should outlive it, as the post says.

    The control is a default connection of the lab's own user that leaves the guard to the database, takes a
    lock and stays idle in its transaction: the same guard must end it, or the trial shows nothing."""
    if not env.services.is_embedded("postgres"):
        raise Skip("it sets a guard on the database and creates a role: only on a PostgreSQL the lab started")
    if env.spec.driver != DEFAULT_DRIVER:
        raise Skip(f"the role's session is opened with {DEFAULT_DRIVER} only")
    timeout = env.params["timeout_s"]
    guard = f"{int(timeout * 1000)}ms"
    url = env.services.pg_url
    _database_guard(env, guard)
    control = pg_engine(url, guard_left_to_server(url, {}), pin=False, pool_size=1, max_overflow=0)
    holder = env.backend(key=env.key("role"), options={"guard_off_on": "role"})
    try:
        acquired = holder.acquire()
        held_guard, held_source = holder.guard_in_force()
        role_settings = _role_settings(env, holder.guard_role)
        conn = control.connect()  # autobegin: the lock's transaction stays open, as method 1's does
        try:
            got, control_pid = conn.execute(_TRY_LOCK, {"k": env.key("control")}).one()
            control_guard, control_source = conn.execute(_GUARD_IN_FORCE).one()
            t0 = time.monotonic()
            env.wait_until(t0, 2 * timeout)  # past the guard's timeout, both idle in their transactions
            pg.wait_gone(env.monitor, control_pid, within=2 * timeout)  # the guard's timer is not exact
            state, control_state = pg.session_state(env.monitor, holder.lock_pid), pg.session_state(env.monitor,
                                                                                                    control_pid)
            held_after = holder.held()
        finally:
            conn.invalidate()
            conn.close()
        release = release_said(holder)
    finally:
        try:
            holder.close()
            control.dispose()
        finally:
            _database_guard(env, None)
    return {"kind": "guard_off_role", "timeout_s": timeout, "database_guard": guard, "role_settings": role_settings,
            "holder": {"acquired": acquired, "guard": held_guard, "source": held_source, "state": state,
                       "held_after": held_after, "release": release,
                       "server_said": pg.why_session_ended(env.services.pg_log, holder.lock_pid)},
            "control": {"acquired": got, "guard": control_guard, "source": control_source, "state": control_state,
                        "server_said": pg.why_session_ended(env.services.pg_log, control_pid)}}


# --- one giant transaction ------------------------------------------------------------------------------

GIANT_SHAPES = ("giant", "per_company")  # every company in one transaction; one transaction per company


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
    table, churn = _fresh_table(env, label, n), _fresh_table(env, f"{label}_churn", n)
    run_id = f"{shape}-{env.spec.index}"
    seen = {"written": 0, "churned": 0, "churned_at_begin": 0, "xid_ages": []}

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
            seen["at_kill"] = {**session_horizon(env.monitor, pid), **vacuum(env.monitor, churn),
                               "churned_while_open": seen["churned"] - seen["churned_at_begin"]}
            seen["kill"] = terminate_confirmed(env.monitor, pid)  # FaultNotConfirmed: the trial errors

    backend = env.backend(table=table, key=env.key(label))
    try:
        if shape == "giant":
            results = [backend.rebuild_batch(list(range(1, n + 1)), COMPANY_SIZE, run_id, point)]
        else:
            results = []
            for company in range(1, n + 1):
                results.append(backend.rebuild(company, COMPANY_SIZE, run_id, point))
                if "kill" in seen:
                    break  # the run was killed: nothing after it starts
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


def giant_trial(env: TrialEnv) -> dict:
    """One transaction for every company against one per company, each killed halfway, in alternating order."""
    order = list(GIANT_SHAPES)
    if env.spec.index % 2:
        order.reverse()
    runs = {shape: _killed_run(env, shape, f"g{i}") for i, shape in enumerate(order)}
    return {"kind": "giant_transaction", "companies": env.params["giant_companies"], "rows": COMPANY_SIZE,
            "order": order, "exercised": True, **runs}


# --- throughput ------------------------------------------------------------------------------------------

class _InFlight:
    """How many of a run's write transactions were open at once, at most (from the rebuild's own points)."""

    def __init__(self):
        self.now, self.peak, self._lock = 0, 0, threading.Lock()

    def point(self, name, conn) -> None:
        if name in ("begin", "after_commit"):
            with self._lock:
                self.now += 1 if name == "begin" else -1
                self.peak = max(self.peak, self.now)


def _companies_per_second(env: TrialEnv, name: str, workers: int, rep: int) -> dict:
    """One run of backend `name`, `workers` threads sharing it, rebuilding every company of a fresh table once."""
    companies = env.params["throughput_companies"]
    table = env.table(f"tp_{name}_{workers}_{rep}")
    table.fill(env.writes, range(1, companies + 1), COMPANY_SIZE)
    run = env.backend(name, table=table, key=env.key(f"tp-{name}-{workers}-{rep}"))
    ids = list(range(1, companies + 1))
    flight = _InFlight()
    try:
        if not run.acquire():
            raise RuntimeError(f"{name} could not take a fresh lock")
        pulls = _hands_out(type(run))
        if pulls:
            run.enqueue(ids)  # the producer's step, before the clock starts

        def work(w: int) -> list:
            if not pulls:
                return [run.rebuild(c, COMPANY_SIZE, f"w{w}", flight.point) for c in ids[w::workers]]
            done = []
            while True:
                company, result = run.rebuild_next(COMPANY_SIZE, f"w{w}", flight.point)
                if company is None:
                    return done
                done.append(result)

        start = time.monotonic()
        with ThreadPoolExecutor(workers) as pool:
            results = [r for part in pool.map(work, range(workers)) for r in part]
        seconds = time.monotonic() - start
        run.release()
    finally:
        run.close()
    committed = sum(r.outcome == "committed" for r in results)
    return {"workers": workers, "seconds": round(seconds, 4), "committed": committed, "in_flight_peak": flight.peak,
            "failed": len(results) - committed, "per_s": round(committed / seconds, 2) if seconds else None,
            "waited": round(sum(r.waited for r in results), 3)}


def throughput_trial(env: TrialEnv) -> dict:
    """Every (backend, workers) configuration, repeated; each repetition in its own shuffled order, so a
    loaded or warming machine spreads over all of them. Speedups (4 workers over 1) pair within a repetition."""
    names = list(dict.fromkeys([env.spec.backend, THROUGHPUT_BASELINE]))
    configs = [(name, workers) for name in names for workers in WORKERS]
    runs: dict[tuple[str, int], list[dict]] = {c: [] for c in configs}
    for rep in range(env.params["throughput_reps"]):
        order = list(configs)
        random.Random(f"{env.run_id}:{env.spec.id}:{rep}").shuffle(order)
        for name, workers in order:
            runs[(name, workers)].append(_companies_per_second(env, name, workers, rep))

    def summary(name: str) -> list[dict]:
        out = []
        for workers in WORKERS:
            per_s = [r["per_s"] for r in runs[(name, workers)]]
            out.append({"workers": workers, "per_s": per_s, "median_per_s": round(statistics.median(per_s), 2),
                        "failed": sum(r["failed"] for r in runs[(name, workers)]),
                        "in_flight_peak": max(r["in_flight_peak"] for r in runs[(name, workers)])})
        return out

    def speedups(name: str) -> list[float]:
        top, one = runs[(name, max(WORKERS))], runs[(name, min(WORKERS))]
        return [round(t["per_s"] / o["per_s"], 3) if o["per_s"] else 0.0 for t, o in zip(top, one)]

    return {"kind": "throughput", "companies": env.params["throughput_companies"], "rows": COMPANY_SIZE,
            "reps": env.params["throughput_reps"], "hands_out": _hands_out(backends.load(env.spec.backend)),
            "backend": summary(env.spec.backend), "baseline": summary(THROUGHPUT_BASELINE),
            "baseline_backend": THROUGHPUT_BASELINE,
            "speedups": speedups(env.spec.backend), "baseline_speedups": speedups(THROUGHPUT_BASELINE)}


# --- row locks -------------------------------------------------------------------------------------------

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


def fk_trial(env: TrialEnv) -> dict:
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
    finally:
        holder.close()
    waited = waiting is not None or during["seconds"] >= hold / 2
    return {"kind": "fk_child_insert", "lock_strength": cls.row_lock_strength, "hold_s": hold,
            "child_idle": {k: v for k, v in idle.items() if k != "ended_at"},
            "child_during": {k: v for k, v in during.items() if k != "ended_at"},
            "child_wait_event": waiting, "child_waited": waited,
            # Ended only once the holder had committed: the insert was held up by the rebuild, not slow by itself.
            "child_ended_after_holder_commit": during["ended_at"] >= seen.get("holder_committed_at", float("inf")),
            "holder": result.outcome}


def _wait_event(monitor, pid: int) -> str | None:
    """'Lock/tuple', 'Lock/transactionid' ... while session pid waits on a lock, else None."""
    with monitor.connect() as conn:
        row = conn.execute(text("select wait_event_type, wait_event from pg_stat_activity where pid = :p"),
                           {"p": pid}).first()
    return f"{row[0]}/{row[1]}" if row is not None and row[0] == "Lock" else None


def _hold_after_delete(env: TrialEnv, point: str = "after_delete"):
    hold = env.params["hold_s"]

    def hook(name, conn, sync):
        if name == point:
            sync.started.set()
            env.pause(hold)  # run1 stays inside its write, so run2 overlaps it

    return hook


def _parents(env: TrialEnv, parent: str) -> int:
    with env.monitor.connect() as conn:
        return conn.execute(text(f"select count(*) from {parent} where scope = :s and company_id = :c"),
                            {"s": env.key(), "c": COMPANY}).scalar()


def no_parent_trial(env: TrialEnv) -> dict:
    """Two overlapping rebuilds of a company with no parent row: the lock alone, then the parent created first.

    lock_only runs first: it never creates a parent, so the second form also starts without one."""
    cls = backends.load(env.spec.backend)
    phases = {}
    for policy in ("lock_only", "create"):
        before = _parents(env, cls.parent_table)
        if before:
            raise RuntimeError(f"the company already has a parent row before the {policy} phase")
        result = two_runs(env, _hold_after_delete(env), options={"missing_parent": policy})
        m = result.measures()
        phases[policy] = {"parent_rows_before": before, "parent_rows_after": _parents(env, cls.parent_table),
                          "runs": m["runs"], "rows_seen": m["rows_seen"], "rows_final": m["rows_final"],
                          "runs_in_final": m["runs_in_final"],
                          "company": company_state(COMPANY_SIZE, m["rows_final"], m["runs_in_final"]),
                          "whole": company_whole(COMPANY_SIZE, m["rows_final"], m["runs_in_final"])}
    return {"kind": "no_parent_row", "lock_strength": cls.row_lock_strength, "hold_s": env.params["hold_s"],
            **phases}


# --- unique backstop -------------------------------------------------------------------------------------

def backstop_trial(env: TrialEnv) -> dict:
    cls = backends.load(env.spec.backend)
    result = two_runs(env, _hold_after_delete(env))
    m = result.measures()
    winner, loser = m["runs"]
    with env.monitor.connect() as conn:
        markers_left = conn.execute(text(f"select count(*) from {cls.marker_table} where scope = :s"),
                                    {"s": env.key()}).scalar()
    # Afterwards, with the first rebuild's marker gone: a third rebuild of the company goes through.
    later = env.backend(table=CompanyTable(_table_of(env)))
    try:
        after = later.rebuild(COMPANY, COMPANY_SIZE, "run3")
    finally:
        later.close()
    company = company_state(COMPANY_SIZE, m["rows_final"], m["runs_in_final"])
    torn = [n for n in m["rows_seen"] if n != COMPANY_SIZE]
    if loser["outcome"] == "committed":
        saw = "loser waited, then rebuilt" if loser["waited"] >= env.params["hold_s"] / 2 else "loser rebuilt at once"
    elif loser["sqlstate"] == "23505":
        saw = "loser failed with 23505 after waiting" if loser["waited"] >= env.params["hold_s"] / 2 else \
            "loser failed with 23505 at once"
    else:
        saw = f"loser {loser['outcome']}"
    return {"kind": "backstop_loser", "hold_s": env.params["hold_s"], "runs": m["runs"], "rows_seen": m["rows_seen"],
            "rows_final": m["rows_final"], "runs_in_final": m["runs_in_final"], "company": company, "torn": torn,
            "whole": company_whole(COMPANY_SIZE, m["rows_final"], m["runs_in_final"]),
            "loser_deleted": loser["deleted"], "loser_saw": saw, "markers_left": markers_left,
            "winner": winner["outcome"], "later_rebuild": after.outcome, "later_error": after.error}


def _table_of(env: TrialEnv) -> str:
    """The company table two_runs made for this trial (it names it from the trial, label 'rows')."""
    return table_name(f"{env.run_id}_{env.spec.id}_rows")


# --- idempotent rebuilds ---------------------------------------------------------------------------------

def _final_rows(env: TrialEnv) -> dict:
    with env.monitor.connect() as conn:
        row = conn.execute(text(f"select count(*), count(distinct n), min(n), max(n), "
                                f"array_agg(distinct run_id order by run_id) from {_table_of(env)} "
                                f"where company_id = :c"), {"c": COMPANY}).one()
    return {"rows": row[0], "distinct_n": row[1], "min_n": row[2], "max_n": row[3], "tags": list(row[4] or [])}


def inputs_trial(env: TrialEnv, same: bool) -> dict:
    """Two overlapping rebuilds, held after run1's delete and (a second overlap) before run1's commit."""
    options = {"inputs": "inputs-v1"} if same else {}
    overlaps = {}
    for point in ("after_delete", "before_commit"):
        result = two_runs(env, _hold_after_delete(env, point), options=options)
        m = result.measures()
        first, second = m["runs"]
        last = "run1" if first["ended"] >= second["ended"] else "run2"
        final = _final_rows(env)
        expected = [options["inputs"]] if same else [last]
        overlaps[point] = {"runs": m["runs"], "rows_seen": m["rows_seen"], "final": final,
                           "last_committer": last, "started_last": "run2",
                           "whole": final["rows"] == COMPANY_SIZE == final["distinct_n"]
                           and (final["min_n"], final["max_n"]) == (1, COMPANY_SIZE),
                           "tags_expected": expected, "tags_as_expected": final["tags"] == expected}
    identical = all(o["whole"] and o["tags_as_expected"] for o in overlaps.values())
    return {"kind": "same_inputs" if same else "different_inputs", "same": same,
            "inputs": options.get("inputs", "each run's own id"),
            "hold_s": env.params["hold_s"], "overlaps": overlaps, "identical": identical if same else None,
            "last_committer_won": all(o["whole"] and o["tags_as_expected"] for o in overlaps.values()),
            "newest_kept": {p: o["final"]["tags"] == ["run2"] for p, o in overlaps.items()}}


# --- queue -----------------------------------------------------------------------------------------------

def queue_trial(env: TrialEnv) -> dict:
    companies = env.params["queue_companies"]
    # 1. A second run asks for the company the first one is rebuilding: first while its job row is new (the first
    # run's transaction creates it), then again once the job exists.
    asks = {}
    for when in ("new_job", "existing_job"):
        pair = two_runs(env, _hold_after_delete(env, "after_lock")).measures()
        second = pair["runs"][1]
        asks[when] = {"outcome": second["outcome"], "waited": second["waited"], "error": second["error"],
                      "company": company_state(COMPANY_SIZE, pair["rows_final"], pair["runs_in_final"]),
                      "whole": company_whole(COMPANY_SIZE, pair["rows_final"], pair["runs_in_final"])}
    # 2. Runs pull companies from one queue until it is empty.
    table = env.table("pull")
    table.fill(env.writes, range(1, companies + 1), COMPANY_SIZE)
    key = env.key("pull")
    runs = [env.backend(table=table, key=key) for _ in range(QUEUE_RUNS)]
    claims: list[tuple[str, int, str]] = []
    claimed = threading.Lock()

    def pull(i: int) -> None:
        while True:
            company, result = runs[i].rebuild_next(COMPANY_SIZE, f"run{i}")
            if company is None:
                return
            with claimed:
                claims.append((f"run{i}", company, result.outcome))

    try:
        runs[0].enqueue(list(range(1, companies + 1)))
        start = time.monotonic()
        with ThreadPoolExecutor(QUEUE_RUNS) as pool:
            list(pool.map(pull, range(QUEUE_RUNS)))
        seconds = time.monotonic() - start
    finally:
        for run in runs:
            run.close()
    by_company: dict[int, list[str]] = {}
    for run, company, outcome in claims:
        if outcome == "committed":
            by_company.setdefault(company, []).append(run)
    with env.monitor.connect() as conn:
        whole = {c: company_whole(COMPANY_SIZE, table.count(conn, c), table.runs_in(conn, c))
                 for c in range(1, companies + 1)}
    per_run = {f"run{i}": sum(1 for r, _, o in claims if r == f"run{i}" and o == "committed")
               for i in range(QUEUE_RUNS)}
    return {"kind": "queue_exclusion", "companies": companies, "runs": QUEUE_RUNS,
            "hold_s": env.params["hold_s"], "second_asks": asks["existing_job"], "second_asks_new_job": asks["new_job"],
            "per_run": per_run, "rebuilt": len(by_company),
            "duplicates": sorted(c for c, rs in by_company.items() if len(rs) > 1),
            "missing": sorted(set(range(1, companies + 1)) - set(by_company)),
            "intact": all(whole.values()),
            "seconds": round(seconds, 4), "per_s": round(len(by_company) / seconds, 2) if seconds else None,
            "failed": sum(o != "committed" for _, _, o in claims)}
