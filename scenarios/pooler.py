"""Every PostgreSQL lock, and its writes, through PgBouncer: session pooling, and transaction pooling with
more clients than server sessions.

A transaction pooler gives a server session to whichever client's transaction comes next. A session
advisory lock stays on the server session its client's transaction ran on; once that transaction ends,
other clients' transactions run there, inside the lock. Each trial starts its own PgBouncer in front of
the run's embedded PostgreSQL, runs two runs of the job through it (the second while the first holds),
and shows from pg_locks and pg_stat_activity on a direct monitor session who holds the lock, whether
the second run gets it, whether a client that never took it can free it, and what the holder's held()
and release() say.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import ClassVar

import backends
from lab.declarations.capabilities import Capability
from lab.checkers import ops
from lab.checkers.ops import Op, Recorder
from lab.checkers.outcomes import DoesNotRun, NotRun
from lab.checkers.verdict import Verdict
from lab.declarations.columns import FaultFamily
from lab.errors import LabError
from lab.stack.exposure import Trait, when
from lab.declarations.pacing import Exclusive, Pacing
from lab.servers.clients import pg_engine
from lab.servers.pgbouncer.server import MISSING, PgBouncer, find_pgbouncer
from lab.servers.pooler_settings import refusal
from lab.servers.services import Services
from lab.stack.description import PoolMode
from lab.workload.job import run_job
from lab.workload.table import COMPANY_SIZE, Observer
from scenarios._column_kinds import ColumnKind
from scenarios._pool_evidence import (GivenPooler, OwnPooler, PoolView, Probes, TrialPooler, bystander_unlock_all,
                                      sessions_moved)
from scenarios.base import Scenario, Skip, TrialEnv, judged

MODES = {"session_mode": PoolMode.SESSION.value, "transaction_mode": PoolMode.TRANSACTION.value}
# Transaction pooling: two server sessions for a trial's dozen clients. Session pooling cannot move a
# session between clients, and a client beyond its pool waits for one to leave: room for all of them.
POOL_SIZE = {PoolMode.SESSION.value: 16, PoolMode.TRANSACTION.value: 2}
PROBE_CLIENTS, PROBE_ROUNDS = 3, 2
COMPANY = 1
EXTERNAL = ("needs a PostgreSQL the lab started: its own PgBouncer keeps the server's password in a file, which the "
            "lab writes only for a password that dies with the run (--pg-pooler-dsn runs this column through yours)")


# Its columns: PostgreSQL through PgBouncer, each in its mode. Both modes keep a transaction on one server session, so
# a lock inside the write's transaction is one they reach and cannot take away (its trials check it).
THROUGH_PGBOUNCER = ColumnKind(FaultFamily.POOLERS, strikes=("postgres",), cannot_take=(Capability.IN_TRANSACTION,),
                               cannot_take_why="a pooler keeps each transaction on one server session, and this lock "
                                               "lives inside the write's transaction")


class Pooler(Scenario):
    name = "pooler"
    # The sequential rule: a cell whose trials disagree runs up to three more. A trial through the user's pooler
    # runs alone: its server sessions are one pool that every such trial would share.
    pacing = Pacing(extra_trials_when_varied=3, exclusive=Exclusive.PER_TRIAL)
    summary = ("every PostgreSQL lock and its writes through the lab's own PgBouncer, session and transaction "
               "pooling, more clients than server sessions")
    title = "through PgBouncer"
    columns = (
        THROUGH_PGBOUNCER("session_mode", "through PgBouncer, session pooling", 23,
                          "the run's sessions go through the lab's own PgBouncer in session pooling, and the holder's lock "
                          "session is killed behind it; confirmed by the server session PgBouncer had paired it with",
                          also=(when(Trait.POOLER, PoolMode.SESSION.value),)),
        THROUGH_PGBOUNCER("transaction_mode", "through PgBouncer, transaction pooling", 24,
                          "the same in transaction pooling, where consecutive transactions may land on different server "
                          "sessions; confirmed the same way",
                          also=(when(Trait.POOLER, PoolMode.TRANSACTION.value),)),
    )
    params = {
        "quick": {"hold_s": 1.0, "trials": 1, "parallel": 6},
        "default": {"hold_s": 2.0, "trials": 3, "parallel": 6},
    }
    search_path: ClassVar[str | None] = None  # where to look for pgbouncer; None: PATH, then /usr/sbin

    def applies_to(self, backend_cls) -> str | None:
        """A pooler reaches every lock whose lock, fence or writes go to PostgreSQL (lab/declarations/where.py): a lock elsewhere
        still has its fence and writes through it."""
        unreached = backend_cls.where().unreached_by("postgres", "a PostgreSQL pooler")
        if unreached is not None:
            return unreached
        if backend_cls.lock_service == "postgres" and not backend_cls.lock_routable:  # the lab cannot put one in its way
            return NotRun(f"{backend_cls.name} declares that its lock connection cannot be routed through a pooler")
        return None

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        if find_pgbouncer(self.search_path) is None:
            return DoesNotRun(MISSING)
        if MODES[variant] == "transaction" and backend_cls.session_settings:
            return NotRun("its library's connections keep the lab's settings (the lab's schema on the search path, "
                          "the pinned guards) as session state, which transaction pooling does not keep")
        return None

    def exclusive(self, spec, services) -> bool:
        """A trial through the user's pooler (--pg-pooler-dsn): one pool for all of them, so one at a time."""
        return services.pg_pooler_url is not None and services.pg_pooler_mode == MODES[spec.variant]

    def pg_sessions(self, backend_cls, profile: str) -> int:
        """At most the pooler's server sessions, and the observer's."""
        return max(POOL_SIZE.values()) + 1

    def run_trial(self, env: TrialEnv) -> dict:
        """Through the user's pooler (--pg-pooler-dsn) for the column of its mode; else through the lab's own
        PgBouncer, which needs a PostgreSQL the lab started."""
        mode, given = MODES[env.spec.variant], env.services.pg_pooler_url
        if given is not None and env.services.pg_pooler_mode == mode:
            routed = replace(env.services, pg_url=given, embedded={}, tmp=None)
            return {"pool_mode": mode, "pooler": "given", **through_pooler(env, GivenPooler(env.monitor), routed)}
        server = env.services.embedded.get("postgres")
        if server is None or env.services.tmp is None:  # the lab's temp dir comes with its servers
            raise Skip(NotRun(EXTERNAL if given is None else
                              f"your pooler (--pg-pooler-dsn) pools by {env.services.pg_pooler_mode}, and the lab's "
                              f"own PgBouncer in {mode} mode needs a PostgreSQL the lab started"))
        binary = find_pgbouncer(self.search_path)
        if binary is None:
            raise Skip(DoesNotRun(MISSING))
        with PgBouncer(env.services.tmp, env.services.pg(), mode, pool_size=POOL_SIZE[mode],
                       os_user=server.user, binary=binary) as bouncer:
            routed = env.services.routed("postgres", [bouncer.port])
            return {"pool_mode": mode, "pool_size": POOL_SIZE[mode],
                    **through_pooler(env, OwnPooler(bouncer), routed)}

    def judge(self, measures: dict, backend_cls) -> Verdict:
        """The checkers over both runs' operations: the same as without a pooler, unless the pooler let run2 in
        while run1 held. Whether it moved sessions between clients at all is the pool's own evidence
        (`sessions_moved`)."""
        return judged(measures, backend_cls)


def through_pooler(env: TrialEnv, pooler: TrialPooler, routed: Services) -> dict:
    """Two runs of the trial's backend, lock and writes through the pooler (routed: the services with PostgreSQL's
    address the pooler's); run2 starts while run1 holds (before its write for a lock held across writes, after its
    delete for a lock inside the write)."""
    cls = backends.load(env.spec.backend)
    run_level = cls.holds_across_writes()
    writes = pg_engine(routed.pg(), pool_size=2, max_overflow=2, connect_args={"application_name": "locklab-writes"})
    table = env.table()
    table.seed(env.writes, COMPANY, COMPANY_SIZE)
    pool, history, seen = PoolView(env.monitor, pooler), Recorder(), {}
    first, second = (env.backend(table=table, routed=routed, writes=writes) for _ in range(2))
    probes = Probes(routed.pg(), PROBE_CLIENTS)
    started, second_done = threading.Event(), threading.Event()

    def first_point(name, conn):
        if name == "begin" and run_level:
            seen["held_before_write"] = first.held()  # what a careful holder would ask before writing
        if name != ("after_acquire" if run_level else "after_delete"):
            return
        seen["probes"] = probes.run(PROBE_ROUNDS)
        pooler.saw(first.lock_pid, *(probe["pid"] for probe in seen["probes"]))
        seen["at_hold"], seen["clients"] = pool.sessions(), pool.clients()
        started.set()
        # A run2 still going after the hold waits behind run1 on the pool's last server session: a client
        # more would wait for one as well, so the bystander comes only once run2 is done.
        if second_done.wait(env.params["hold_s"]):
            seen["bystander"] = bystander_unlock_all(routed.pg(), pool)
            seen["held_after_bystander"] = first.held() if run_level else None

    def second_point(name, conn):
        if name == "after_acquire" and run_level:
            pooler.saw(second.lock_pid)
            seen["both"] = {"first_held": first.held(), "second_held": second.held(), "sessions": pool.sessions()}

    closed: list[bool] = []

    def close_second():  # once: not every library's close() may be called twice
        if not closed:
            closed.append(True)
            second.close()

    def second_run():
        try:
            return run_job(second, [COMPANY], COMPANY_SIZE, "run2", second_point, history=history)
        finally:
            # A finished run leaves, as the post's job exits: method 1's refused run would otherwise keep a
            # transaction, and with it one of the pool's two server sessions, until the trial ends.
            close_second()
            second_done.set()

    t0 = time.monotonic()
    try:
        watch = Observer(env.monitor, table, COMPANY, on_change=history.observed)
        with watch as observer, ThreadPoolExecutor(2) as workers:
            run1 = workers.submit(run_job, first, [COMPANY], COMPANY_SIZE, "run1", first_point, history=history)
            if not started.wait(30) and not run1.done():
                raise LabError("run1 never reached the point where run2 should start")
            run2 = workers.submit(second_run)
            jobs = [run1.result(), run2.result()]
        with env.writes.connect() as conn:
            final = {"rows": table.count(conn, COMPANY), "runs": table.runs_in(conn, COMPANY)}
        refused = refusal(writes)
    finally:
        first.close()
        close_second()
        probes.close()
        writes.dispose()
    return {"runs": [job.summary(t0) for job in jobs], "rows": COMPANY_SIZE, "rows_seen": observer.seen,
            "settings": f"per transaction: the pooler refused startup options ({refused})" if refused
            else "startup options",
            **_measures(cls, history.ops(), final, jobs, (first, second), seen)}


def _measures(cls, history: list[Op], final: dict, jobs: list, runs: tuple, seen: dict) -> dict:
    """What the trial showed: the lock's one job, and the pooler's evidence of who held what."""
    (job1, job2), (first, second) = jobs, runs
    sessions = {s["pid"] for s in seen.get("at_hold", [])}
    lock_sessions = sorted(s["pid"] for s in seen.get("at_hold", []) if s["advisory_locks"])
    probes, both, bystander = seen.get("probes") or [], seen.get("both", {}), seen.get("bystander")
    return {
        "rows_final": final["rows"], "runs_in_final": final["runs"],
        "history": ops.to_json(history), "final": {str(COMPANY): final},
        "clients_at_hold": seen.get("clients"), "server_sessions_at_hold": len(sessions),
        "who_holds": seen.get("at_hold"), "lock_sessions": lock_sessions, "probes": probes,
        "lock_session_lent": any(p["pid"] in lock_sessions for p in probes),
        "holder": {"lock_pid": first.lock_pid, "lock_pid_is_a_server_session": first.lock_pid in sessions,
                   "write": job1.outcome, "release": job1.release,
                   "held_when_second_got_in": both.get("first_held"),
                   "held_before_write": seen.get("held_before_write"),
                   "held_after_bystander": seen.get("held_after_bystander")},
        "second": {"acquired": job2.acquired, "lock_pid": second.lock_pid,
                   "on_holder_session": second.lock_pid in lock_sessions, "held": both.get("second_held"),
                   "release": job2.release, "sessions_then": both.get("sessions")},
        "bystander": bystander and {**bystander, "freed_holder_lock": bystander["pid"] in lock_sessions
                                    and bystander["locks_after"] < bystander["locks_before"]},
        "sessions_moved": sessions_moved(probes),  # the pooler's part: did it move transactions between sessions?
    }
