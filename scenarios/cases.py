"""The post's cases A to E: a session lock, an idle guard, and a second session trying for it.

Every session-lock backend runs every variant, so the post's five cases come
out as five cells of a measured matrix whose other cells the post marks
"follows" (reasoned from the connection's state, not run).

A lock on MariaDB (GET_LOCK) runs the same variants under MariaDB's guards: idle_transaction_timeout for the
post's idle_in_transaction_session_timeout, wait_timeout for idle_session_timeout, and idle_write_transaction_timeout,
which PostgreSQL has no counterpart of. A MariaDB session is in a transaction only once it has read an InnoDB
table, which the lock's own SELECT GET_LOCK() does not: one more variant reads the company table on the lock's
session first, as a job reading its work list on that connection would.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Callable

import backends
from backends.base import Backend, describe_error
from lab.declarations.capabilities import Capability
from lab.checkers import ops
from lab.checkers.ops import F, Recorder, Type
from lab.checkers.outcomes import NotRun
from lab.checkers.verdict import Verdict
from lab.declarations.columns import FaultFamily
from lab.stack.exposure import ON, Trait, when
from lab.faults import SessionTimeout, idle_in_transaction_timeout, idle_session_timeout, mariadb_guard
from lab.measures.kinds import Measured
from lab.declarations.post_role import PostRole
from lab.servers import sessions
from lab.servers.postgres import sql as pg
from lab.servers.postgres.drivers import DEFAULT as DEFAULT_DRIVER
from scenarios._column_kinds import ColumnKind
from scenarios.base import Scenario, Skip, TrialEnv, judged, release_said

# (the post's method the backend declares, variant) -> the post's case letter (the backend's post_role).
POST_CASES = {
    (PostRole.METHOD_1, "idle_in_transaction"): "A",
    (PostRole.METHOD_3, "idle_in_transaction"): "B",
    (PostRole.METHOD_2, "idle_in_transaction"): "C",
    (PostRole.METHOD_2, "query_then_idle_in_transaction"): "D",
    (PostRole.METHOD_3, "idle_session"): "E",
}

# variant -> the guard it sets, by the server of the lock's session; a server with no such guard: n/a.
GUARDS: dict[str, dict[str, Callable[[float], SessionTimeout]]] = {
    "idle_in_transaction": {"postgres": idle_in_transaction_timeout,
                            "mariadb": partial(mariadb_guard, "idle_transaction_timeout")},
    "query_then_idle_in_transaction": {"postgres": idle_in_transaction_timeout,
                                       "mariadb": partial(mariadb_guard, "idle_transaction_timeout")},
    # MariaDB's case, as its column declares (strikes mariadb): GET_LOCK opens no transaction, a table read does. On
    # PostgreSQL the lock's own query opens it (or, in autocommit, a read opens none): the idle_in_transaction column.
    "read_then_idle_in_transaction": {"mariadb": partial(mariadb_guard, "idle_transaction_timeout")},
    "idle_write_transaction": {"mariadb": partial(mariadb_guard, "idle_write_transaction_timeout")},
    "idle_session": {"postgres": idle_session_timeout, "mariadb": partial(mariadb_guard, "wait_timeout")},
}
READS_A_TABLE = ("read_then_idle_in_transaction", "idle_write_transaction")  # read_table() on the lock's session first

# The post's probes are at t=1s and t=5s under a 3 s timeout; we keep those ratios.
PROBE_FRACTIONS = (1 / 3, 5 / 3)


# Its columns: a SQL server's idle guard ending the lock's session, on PostgreSQL and MariaDB or MariaDB's alone.
SQL_IDLE_GUARD = ColumnKind(FaultFamily.IDLE_GUARDS, strikes=("postgres", "mariadb"))
MARIADB_IDLE_GUARD = ColumnKind(FaultFamily.IDLE_GUARDS, strikes=("mariadb",))


class Cases(Scenario):
    name = "cases"
    measured = Measured.POST_CASE
    driver_axis = True  # the driver decides whether the lock connection sits in a transaction
    default_run = True
    summary = "the post's cases A-E: session lock + idle timeout, probed at t=1 and t=5 (scaled)"
    requires = frozenset({Capability.SESSION_LOCK})
    title = "the lock session's idle guard"
    columns = (
        SQL_IDLE_GUARD("idle_in_transaction", "idle in transaction past the timeout", 1,
                       "the holder's lock session sits idle in its transaction past idle_in_transaction_session_timeout;"
                       " confirmed by the server's log line or the session gone from pg_stat_activity",
                       setting="idle_in_transaction_session_timeout", also=(when(Trait.IDLE_IN_TRANSACTION_GUARD, ON),)),
        MARIADB_IDLE_GUARD("read_then_idle_in_transaction", "one table read, then idle in transaction", 1.5,
                           "MariaDB: the lock's session reads the company table (opening an InnoDB transaction) and "
                           "then sits idle past idle_transaction_timeout; confirmed by the server log's aborted "
                           "connection or the session gone from the processlist"),
        SQL_IDLE_GUARD("query_then_idle_in_transaction", "one more query, then that timeout", 2,
                       "the same, after one more query on the lock's session (the naive liveness check); confirmed the "
                       "same way", setting="idle_in_transaction_session_timeout",
                       also=(when(Trait.IDLE_IN_TRANSACTION_GUARD, ON),)),
        MARIADB_IDLE_GUARD("idle_write_transaction", "one table read, then idle_write_transaction_timeout", 2.5,
                           "MariaDB: the lock's session reads the company table, then sits idle past "
                           "idle_write_transaction_timeout, the guard of transactions that wrote (PostgreSQL has none); "
                           "confirmed the same way"),
        SQL_IDLE_GUARD("idle_session", "idle_session_timeout", 3,
                       "the holder's AUTOCOMMIT lock session sits idle past idle_session_timeout; confirmed the same way",
                       setting="idle_session_timeout", also=(when(Trait.IDLE_SESSION_GUARD, ON),)),
    )
    params = {
        "quick": {"timeout_s": 1.0, "trials": 1, "parallel": 24},
        "default": {"timeout_s": 3.0, "trials": 3, "parallel": 40},
    }

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        if backend_cls.lock_service not in GUARDS[variant]:
            if variant in READS_A_TABLE:
                return (f"the table read that opens a transaction is {' and '.join(GUARDS[variant])}'s case (GET_LOCK "
                        f"opens none); on {backend_cls.lock_service} the lock's own query opens it")
            return f"{backend_cls.lock_service} has no such guard: it is {' and '.join(GUARDS[variant])}'s"
        # The guard would reach such a lock; the lab lacks the backend's hook to make the case: *not run*.
        if variant == "query_then_idle_in_transaction" and backend_cls.touch is Backend.touch:
            return NotRun("the backend has no touch() to run one more query on its lock session")
        if variant in READS_A_TABLE and backend_cls.read_table is Backend.read_table:
            return NotRun("the backend has no read_table() to read the company table on its lock session")
        return None

    def run_trial(self, env: TrialEnv) -> dict:
        timeout = env.params["timeout_s"]
        variant = env.spec.variant
        cls = backends.load(env.spec.backend)
        fault = GUARDS[variant][cls.lock_service](timeout)
        if fault.service == "postgres":
            too_old = fault.unsupported_reason(pg.server_version_num(env.monitor))
            if too_old:
                raise Skip(too_old)

        table = env.table() if variant in READS_A_TABLE else None  # what the lock's session reads
        holder = env.backend(lock_settings=fault.session_settings(), table=table)
        history = Recorder()
        try:
            history.add("holder", Type.INVOKE, F.ACQUIRE)
            acquired = holder.acquire()
            history.granted("holder", acquired, token=holder.token)
            if variant == "query_then_idle_in_transaction":
                holder.touch()
            if variant in READS_A_TABLE:
                holder.read_table()
            # The probes count from the lock's last statement, when the guard's timer starts: a driver that
            # connects slowly (Django's first connection sets Django up) must not eat into the window.
            t0 = time.monotonic()
            state = sessions.state(env.monitor, holder.lock_pid)
            probes = []
            for n, fraction in enumerate(PROBE_FRACTIONS, start=1):
                env.wait_until(t0, timeout * fraction)
                history.add(f"probe-{n}", Type.INVOKE, F.ACQUIRE)
                got = env.contender_gets_in()
                history.granted(f"probe-{n}", got)
                if got:  # the probe gave the lock back at once
                    history.add(f"probe-{n}", Type.INVOKE, F.RELEASE)
                    history.add(f"probe-{n}", Type.OK, F.RELEASE)
                probes.append({"t": round(3 * fraction), "at": round(time.monotonic() - t0, 3), "got": got})
            held_after = holder.held()
            history.add("holder", Type.OK, F.HELD, held=bool(held_after))
            next_query, next_error = "alive", None
            try:
                holder.touch()
            except Exception as exc:  # what the driver says is the measurement
                next_query, next_error = type(exc).__name__, describe_error(exc)
                history.add("holder", Type.OK, F.TOLD, how="exception", via="its next query", text=next_error)
            history.add("holder", Type.INVOKE, F.RELEASE)
            release = release_said(holder)
            history.add("holder", Type.OK if release == "released" else Type.FAIL, F.RELEASE, said=release)
            return {
                # The post's case letter of the post's method, or of a lock that is that method on another server.
                "case": POST_CASES.get((cls.post_role or cls.analogue_of, variant))
                if env.spec.driver == DEFAULT_DRIVER else None,
                "lock_server": cls.lock_service,
                "setting": fault.setting, "timeout_s": fault.session_settings()[fault.setting]
                if fault.service == "mariadb" else timeout,
                "acquired": acquired, "holder_state": state, "probes": probes,
                "held_after": held_after, "next_query": next_query, "next_query_error": next_error,
                "release": release,
                "server_said": sessions.why_ended(env.services, env.monitor, holder.lock_pid),
                # Whether the guard ended the lock's session, by the server's own word where it can be read.
                "evidence": fault.struck(env.services, env.monitor, holder.lock_pid),
                "history": ops.to_json(history.ops()),
            }
        finally:
            holder.close()

    def judge(self, measures: dict, backend_cls) -> Verdict:
        """The checkers: a probe that got the lock while the holder still believed it held is a lost lock;
        these trials write nothing, so no more is claimed."""
        return judged(measures, backend_cls)
