"""`lab doctor`: check a real PostgreSQL for the post's hidden-expiry traps, reading only.

The session is opened with default_transaction_read_only=on and runs only SELECT and SHOW,
so it is safe to point at production. Each check returns pass / warn / fail with the
evidence and the SQL it ran, so an operator can re-run it by hand.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
from dataclasses import asdict, dataclass, field

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from lab.errors import ServiceError
from lab.servers.clients import first_line, parse_pg_dsn, pg_engine, redact
from lab.servers.kernel_timers import keepalive_lateness_s
from lab.servers.pooler_settings import refusal
from lab.servers.postgres.sql import KEEPALIVE_SQL, keepalive_estimate
from lab.stack import Guard, Patroni, PoolMode, Postgres, Replication, Unknown

GUARDS = ("idle_in_transaction_session_timeout", "idle_session_timeout")


@dataclass
class Check:
    name: str
    status: str  # pass / warn / fail
    summary: str
    evidence: list[str] = field(default_factory=list)
    sql: list[str] = field(default_factory=list)


def _rows(conn: Connection, sql: str, params: dict | None = None) -> list[dict]:
    return [dict(r._mapping) for r in conn.execute(text(sql), params or {})]


GUARD_SETTINGS_SQL = ("select name, setting, unit, source from pg_settings where name in "
                      "('idle_in_transaction_session_timeout', 'idle_session_timeout') order by name")
GUARD_SCOPED_SQL = ("select coalesce(d.datname, '(every database)') as database, "
                    "coalesce(r.rolname, '(every role)') as role, s.setconfig, "
                    "s.setdatabase = 0 or d.datname = current_database() as here "
                    "from pg_db_role_setting s left join pg_database d on d.oid = s.setdatabase "
                    "left join pg_roles r on r.oid = s.setrole")


def guard_facts(conn: Connection) -> dict[str, Guard]:
    """Each idle guard as this session gets it (ms, its source), with the settings per database or role that may
    give another role's sessions of this database a value other than 0."""
    elsewhere: dict[str, list[str]] = {name: [] for name in GUARDS}
    for scoped in _rows(conn, GUARD_SCOPED_SQL):
        for item in scoped["setconfig"] or []:
            name, _, value = item.partition("=")
            if name in GUARDS and scoped["here"] and value.strip() not in ("0", "0ms", "0s", "0min"):
                elsewhere[name].append(f"database {scoped['database']}, role {scoped['role']}: {item}")
    return {r["name"]: Guard(int(r["setting"]), r["source"], tuple(elsewhere[r["name"]]))
            for r in _rows(conn, GUARD_SETTINGS_SQL)}


def check_guards(conn: Connection) -> Check:
    settings_sql, scoped_sql = GUARD_SETTINGS_SQL, GUARD_SCOPED_SQL
    rows = _rows(conn, settings_sql)
    evidence = [f"{r['name']} = {r['setting']}{r['unit'] or ''} (source: {r['source']})" for r in rows]
    for scoped in _rows(conn, scoped_sql):
        for item in scoped["setconfig"] or []:
            if item.split("=", 1)[0] in GUARDS:
                evidence.append(f"set for database {scoped['database']}, role {scoped['role']}: {item}")
    active = {r["name"]: r for r in rows if r["setting"] not in ("0", None)}
    if not active:
        return Check("idle guards", "pass", "neither idle guard is set for this session", evidence,
                     [settings_sql, scoped_sql])
    parts = []
    if "idle_in_transaction_session_timeout" in active:
        parts.append("a session lock on a default (autobegin) connection expires with "
                     "idle_in_transaction_session_timeout")
    if "idle_session_timeout" in active:
        parts.append("a session lock on an AUTOCOMMIT connection expires with idle_session_timeout")
    return Check("idle guards", "warn", "; ".join(parts), evidence, [settings_sql, scoped_sql])


def check_holders(conn: Connection, hung_after_s: float) -> Check:
    sql = ("select l.pid, a.usename, a.application_name, a.state, "
           "round(extract(epoch from clock_timestamp() - a.backend_start), 3)::float as session_age_s, "
           "round(extract(epoch from clock_timestamp() - a.xact_start), 3)::float as xact_age_s, "
           "round(extract(epoch from clock_timestamp() - a.state_change), 3)::float as in_state_s, count(*) as locks "
           "from pg_locks l join pg_stat_activity a on a.pid = l.pid "
           "where l.locktype = 'advisory' and l.granted and l.database = "
           "(select oid from pg_database where datname = current_database()) and l.pid <> pg_backend_pid() "
           "group by 1, 2, 3, 4, 5, 6, 7 order by l.pid")
    rows = _rows(conn, sql)
    if not rows:
        return Check("advisory lock holders", "pass", "no session holds an advisory lock in this database", [], [sql])
    evidence, statuses, why = [], ["pass"], []
    for r in rows:
        evidence.append(f"pid {r['pid']} ({r['usename']}, {r['application_name'] or '-'}): {r['state']}, "
                        f"{r['locks']} lock(s), session {r['session_age_s']} s old, "
                        f"in this state {r['in_state_s']} s, transaction {r['xact_age_s']} s")
        if r["state"] == "idle in transaction":
            statuses.append("fail")
            why.append(f"pid {r['pid']} holds an advisory lock idle in transaction: the post's bug")
        elif (r["session_age_s"] or 0) > hung_after_s:
            statuses.append("warn")
            why.append(f"pid {r['pid']} has held its session for {r['session_age_s']} s: a hung run?")
    summary = "; ".join(why) or f"{len(rows)} session(s) hold advisory locks, none idle in transaction"
    return Check("advisory lock holders", _worst(statuses), summary, evidence, [sql])


def check_keepalives(conn: Connection) -> Check:
    sql = KEEPALIVE_SQL
    values = {r["name"]: int(r["setting"]) for r in _rows(conn, sql)}
    total, idle, interval, count = keepalive_estimate(values)
    evidence = [f"{k} = {v}" + (" (0: the OS default)" if v == 0 else "") for k, v in values.items()]
    late = {hz: keepalive_lateness_s(idle, interval, count, hz) for hz in (100, 250, 300, 1000)}
    evidence.append("Linux fires keepalive timers up to one timer-wheel bucket late, which adds up to "
                    + ", ".join(f"{late[hz]:.0f} s at HZ={hz}" for hz in late)
                    + " (the server host's kernel decides; lab run --scenario netdrop measures it)")
    summary = (f"a holder whose host drops off the network keeps its session lock for about "
               f"{total // 3600} h {total % 3600 // 60} min ({idle} s + {count} probes x {interval} s)")
    return Check("TCP keepalives", "warn" if total > 3600 else "pass", summary, evidence, [sql])


POOLER_WAIT_S = 2.0  # how long a client may wait for a server session before the check says why
_PID_SQL = "select pg_backend_pid()"


class _Pending:
    """One client's query in a daemon thread: a pooler that queues a client for a server session
    must not hang the doctor (PgBouncer waits up to 120 s by default)."""

    def __init__(self, fn):
        self._done: queue.Queue = queue.Queue(1)
        threading.Thread(target=self._call, args=(fn,), name="doctor-client", daemon=True).start()

    def _call(self, fn) -> None:
        try:
            self._done.put((True, fn()))
        except BaseException as exc:  # handed back to the doctor's thread
            self._done.put((False, exc))

    def result(self, timeout: float) -> tuple[bool, object]:
        """(True, value) when the query answered within timeout, (False, None) while it still waits."""
        try:
            ok, value = self._done.get(timeout=timeout)
        except queue.Empty:
            return False, None
        if not ok:
            raise value
        return True, value


def _hang_up(conn: Connection, waiting: _Pending) -> None:
    """End a client the pooler keeps queueing: shut its socket (a cancel request does not reach a queued
    client), let its query fail in its thread, and throw the connection away."""
    dbapi = conn.connection.dbapi_connection
    if dbapi is None:  # SQLAlchemy detached it: the connection was closed or invalidated
        raise RuntimeError("no driver connection to hang up")
    fd = dbapi.fileno()
    with socket.socket(fileno=os.dup(fd)) as sock:
        sock.shutdown(socket.SHUT_RDWR)
    try:
        waiting.result(10)
    except Exception:  # the query's own end: "server closed the connection"
        pass
    conn.invalidate()


def _pid(conn: Connection) -> int:
    return conn.execute(text(_PID_SQL)).scalar_one()


@dataclass(frozen=True)
class PoolerSeen:
    """What the two clients saw between them and the server: the check, and the pool mode as a stack fact."""

    check: Check
    mode: PoolMode | Unknown
    kind: str | None | Unknown  # what sits in between, in words; None: nothing


def _kind(refused: str | None) -> str:
    return ("a pooler that refuses the options startup parameter, such as PgBouncer" if refused else
            "a pooler or proxy (the server listens on another port than the DSN names)")


def check_pooler(engine: Engine, conn: Connection, dsn_host: str | None, dsn_port: int | None,
                 refused: str | None = None) -> Check:
    """Transaction pooling, seen with two clients (see_pooler)."""
    return see_pooler(engine, conn, dsn_host, dsn_port, refused).check


def see_pooler(engine: Engine, conn: Connection, dsn_host: str | None, dsn_port: int | None,
               refused: str | None = None) -> PoolerSeen:
    """Transaction pooling, seen with two clients: one client's transaction stays open while the other's
    next one runs. Without a pooler each client keeps its own server session; a transaction pooler
    gives the second client the session the first one's last transaction used, or moves the first
    one's next transaction to another session (or makes it wait). One client alone cannot see it."""
    addr_sql = "select inet_server_addr()::text as addr, inet_server_port() as port"
    sql = [_PID_SQL, addr_sql]
    first = _pid(conn)
    conn.commit()
    evidence = [f"client 1, a transaction: server session pid {first}"]
    other = engine.connect()
    try:
        waiting = _Pending(lambda: _pid(other))
        answered, open_pid = waiting.result(POOLER_WAIT_S)
        if not answered:
            _hang_up(other, waiting)
            return PoolerSeen(
                Check("connection pooler", "warn", f"a second client got no server session within "
                      f"{POOLER_WAIT_S:.0f} s while the first stayed connected: a pooler with no server session "
                      f"to spare (session pooling with a full pool?)", evidence, sql),
                Unknown(f"a second client waited more than {POOLER_WAIT_S:.0f} s for a server session: a pooler "
                        "with none to spare, whose mode two clients could not see"), "a pooler (it queued a client)")
        evidence.append(f"client 2, a transaction kept open: pid {open_pid}")
        pending = _Pending(lambda: _pid(conn))
        answered, second = pending.result(POOLER_WAIT_S)
        waited = not answered
        if waited:
            other.rollback()  # frees the server session client 1's transaction waits for
            answered, second = pending.result(30)
        conn.commit()
        evidence.append(f"client 1, its next transaction while client 2's stayed open: pid {second}"
                        + (f" (it waited until client 2's ended, {POOLER_WAIT_S:.0f} s)" if waited else ""))
    finally:
        if not other.invalidated:
            other.rollback()
        other.close()
    where = _rows(conn, addr_sql)[0]
    conn.commit()
    evidence.append(f"server sees this session on {where['addr']}:{where['port']}; the DSN names {dsn_host}:{dsn_port}")
    if refused:
        evidence.append(f"the server refused the options startup parameter ({refused}): a pooler such as "
                        f"PgBouncer; the doctor's settings went with each transaction (SET LOCAL)")
    if waited or open_pid == first or second != first:
        return PoolerSeen(
            Check("connection pooler", "fail", "transaction pooling (e.g. PgBouncer pool_mode = transaction): "
                  "one client's transactions run on server sessions that other clients' transactions use, so a "
                  "session advisory lock stays behind on a session anyone may get; use transaction-level locks "
                  "(pg_advisory_xact_lock) or a lease row", evidence, sql),
            PoolMode.TRANSACTION, _kind(refused) if refused else "a transaction pooler")
    if refused or (where["port"] is not None and dsn_port is not None and where["port"] != dsn_port):
        return PoolerSeen(
            Check("connection pooler", "warn", "something (a pooler or proxy) sits in between, and it gives each "
                  "client a server session of its own (session pooling, no transaction pooling seen)", evidence, sql),
            PoolMode.SESSION, _kind(refused))
    return PoolerSeen(Check("connection pooler", "pass", "one session per connection, no sign of a pooler in between",
                            evidence, sql), PoolMode.NONE, None)


def check_waiters(conn: Connection) -> Check:
    sql = ("select name, setting, unit, source from pg_settings where name in "
           "('transaction_timeout', 'statement_timeout', 'lock_timeout') order by name")
    rows = _rows(conn, sql)
    evidence = [f"{r['name']} = {r['setting']}{r['unit'] or ''} (source: {r['source']})" for r in rows]
    names = {r["name"] for r in rows}
    if "transaction_timeout" not in names:
        evidence.append("transaction_timeout: not in this server (PostgreSQL 17+)")
    unbounded = [r["name"] for r in rows if r["name"] in ("lock_timeout", "statement_timeout") and r["setting"] == "0"]
    if len(unbounded) == 2:
        return Check("waiter timeouts", "warn", "lock_timeout and statement_timeout are 0: a run waiting for a "
                     "company's lock waits forever (set lock_timeout and retry the company)", evidence, [sql])
    return Check("waiter timeouts", "pass", "a waiter is bounded by " + ", ".join(
        r["name"] for r in rows if r["setting"] != "0"), evidence, [sql])


REPLICATION_SQL = ("select pg_is_in_recovery() as standby, current_setting('synchronous_standby_names') as sync_names, "
                   "(select count(*) from pg_stat_replication) as standbys")


def replication_fact(conn: Connection) -> Replication | Unknown:
    """Asynchronous or synchronous standbys, as the primary reports them."""
    row = _rows(conn, REPLICATION_SQL)[0]
    if row["standby"]:
        return Unknown("the DSN reaches a standby (pg_is_in_recovery() is true): give the primary's DSN")
    if (row["sync_names"] or "").strip():
        return Replication.SYNC
    return Replication.ASYNC if row["standbys"] else Replication.NONE


@dataclass(frozen=True)
class Examined:
    """What one read-only visit found: the server's version, the checks, and the PostgreSQL part of a stack."""

    version: str
    checks: list[Check]
    postgres: Postgres


def connect_or_unreachable(engine: Engine, server: str, url) -> Connection:
    """A connection of engine's; ServiceError naming the server at url (its password hidden) where it cannot be
    reached, without the driver's traceback."""
    try:
        return engine.connect()
    except Exception as exc:
        raise ServiceError(f"{server} at {redact(url)} is unreachable: {first_line(exc)}") from None


def run_doctor(dsn: str, hung_after_s: float = 3600) -> tuple[str, list[Check]]:
    """Connect read-only and run every check; ServiceError when the server cannot be reached."""
    found = examine(dsn, hung_after_s)
    return found.version, found.checks


NO_HA_READ = Unknown("no --patroni-url given: PostgreSQL does not say which HA manager, if any, runs it")


def examine(dsn: str, hung_after_s: float = 3600, ha: Patroni | None | Unknown = NO_HA_READ) -> Examined:
    """run_doctor's visit, also returning the facts a stack description keeps (ha: what the caller read of the HA
    manager, which PostgreSQL cannot tell)."""
    url = parse_pg_dsn(dsn)
    if url.query.get("target_session_attrs") == "read-write":
        # libpq tells read-write by transaction_read_only, which the doctor's own read-only session sets: it would
        # refuse every server. "primary" (libpq 14+) asks pg_is_in_recovery() instead and finds the same server.
        url = url.update_query_dict({"target_session_attrs": "primary"})
    # pin=False: the doctor reports what the server gives a session, so it must not pin anything itself.
    engine = pg_engine(url, {"default_transaction_read_only": "on"}, pin=False, poolclass=None,
                       connect_args={"application_name": "locklab-doctor"})
    try:
        with connect_or_unreachable(engine, "postgres", url) as conn:
            version: str = conn.execute(text("show server_version")).scalar_one()
            # Read-only is the doctor's promise: a pooler that drops the startup options silently must not void it.
            read_only = conn.execute(text("show transaction_read_only")).scalar()
            conn.commit()
            if read_only != "on":
                raise ServiceError(f"postgres at {redact(url)}: the doctor's session is not read-only "
                                   f"(transaction_read_only = {read_only}): something in between drops its settings "
                                   f"(a pooler that ignores the options startup parameter?); the doctor will not run")
            refused = refusal(engine)
            pooler = see_pooler(engine, conn, url.host, url.port, refused)
            checks = [check_guards(conn), check_holders(conn, hung_after_s), check_keepalives(conn), pooler.check,
                      check_waiters(conn)]
            guards = guard_facts(conn)
            replication = replication_fact(conn)
            conn.rollback()
    finally:
        engine.dispose()
    unread = Unknown("not in this server")
    postgres = Postgres(version, guards.get("idle_in_transaction_session_timeout", unread),
                        guards.get("idle_session_timeout", unread), pooler.mode, pooler.kind, replication, ha)
    return Examined(version, checks, postgres)


def as_json(dsn: str, version: str, checks: list[Check]) -> dict:
    return {"server": redact(parse_pg_dsn(dsn)), "server_version": version,
            "status": worst(checks), "checks": [asdict(c) for c in checks]}


_SEVERITY = {"pass": 0, "warn": 1, "fail": 2}


def _worst(statuses: list[str]) -> str:
    return max(statuses, key=lambda status: _SEVERITY[status], default="pass")


def worst(checks: list[Check]) -> str:
    return _worst([c.status for c in checks])
