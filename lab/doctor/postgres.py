"""`lab doctor`: check a real PostgreSQL for the post's hidden-expiry traps, reading only.

Every transaction of its session is BEGIN READ ONLY and runs only SELECT and SHOW, so it is safe to point at
production. It first says what sits at the DSN (the preflight's look: a primary, a standby, a pooler and its
mode); each check then returns pass / warn / fail with the evidence and the SQL it ran, so an operator can re-run
it by hand.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from lab.errors import ServiceError
from lab.preflight.findings import Finding
from lab.preflight.pooler import POOLER_WAIT_S, PoolerSeen
from lab.preflight.postgres import GUARD_SETTINGS_SQL, GUARDS, look_engine, look_on
from lab.servers.clients import first_line, parse_pg_dsn, redact
from lab.servers.kernel_timers import keepalive_lateness_s
from lab.servers.postgres.sql import KEEPALIVE_SQL, SCOPED_SETTINGS_SQL, keepalive_estimate, scoped_settings
from lab.stack.description import Patroni, PoolMode, Postgres, Replication, Unknown


@dataclass
class Check:
    name: str
    status: str  # pass / warn / fail
    summary: str
    evidence: list[str] = field(default_factory=list)
    sql: list[str] = field(default_factory=list)


def _rows(conn: Connection, sql: str, params: dict | None = None) -> list[dict]:
    return [dict(r._mapping) for r in conn.execute(text(sql), params or {})]


def check_guards(conn: Connection) -> Check:
    settings_sql, scoped_sql = GUARD_SETTINGS_SQL, SCOPED_SETTINGS_SQL
    rows = _rows(conn, settings_sql)
    evidence = [f"{r['name']} = {r['setting']}{r['unit'] or ''} (source: {r['source']})" for r in rows]
    evidence += [f"set for {s.scope}: {s.name}={s.value}" for s in scoped_settings(conn, GUARDS)]
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


def check_pooler(seen: PoolerSeen) -> Check:
    """Transaction pooling, as the preflight's two clients saw it (lab/preflight/pooler.py), worded as a check."""
    evidence, sql = list(seen.evidence), list(seen.sql)
    if seen.queued:
        return Check("connection pooler", "warn", f"a second client got no server session within "
                     f"{POOLER_WAIT_S:.0f} s while the first stayed connected: a pooler with no server session "
                     f"to spare (session pooling with a full pool?)", evidence, sql)
    if seen.mode is PoolMode.TRANSACTION:
        return Check("connection pooler", "fail", "transaction pooling (e.g. PgBouncer pool_mode = transaction): "
                     "one client's transactions run on server sessions that other clients' transactions use, so a "
                     "session advisory lock stays behind on a session anyone may get; use transaction-level locks "
                     "(pg_advisory_xact_lock) or a lease row", evidence, sql)
    if seen.mode is PoolMode.SESSION:
        return Check("connection pooler", "warn", "something (a pooler or proxy) sits in between, and it gives each "
                     "client a server session of its own (session pooling, no transaction pooling seen)", evidence, sql)
    return Check("connection pooler", "pass", "one session per connection, no sign of a pooler in between",
                 evidence, sql)


def pooler_mode(seen: PoolerSeen) -> PoolMode | Unknown:
    """The pool mode as a stack fact."""
    if seen.mode is None:
        return Unknown(f"a second client waited more than {POOLER_WAIT_S:.0f} s for a server session: a pooler "
                       "with none to spare, whose mode two clients could not see")
    return seen.mode


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


def connect_or_unreachable(engine: Engine, server: str, url) -> Connection:
    """A connection of engine's; ServiceError naming the server at url (its password hidden) where it cannot be
    reached, without the driver's traceback."""
    try:
        return engine.connect()
    except Exception as exc:
        raise ServiceError(f"{server} at {redact(url)} is unreachable: {first_line(exc)}") from None


@dataclass(frozen=True)
class Examined:
    """What one read-only visit found: the server's version, the checks, the PostgreSQL part of a stack, and what
    sits at the DSN (the preflight's finding: a primary, a standby, a pooler and its mode)."""

    version: str
    checks: list[Check]
    postgres: Postgres
    finding: Finding


def run_doctor(dsn: str, hung_after_s: float = 3600) -> tuple[str, list[Check]]:
    """Connect read-only and run every check; ServiceError when the server cannot be reached."""
    found = examine(dsn, hung_after_s)
    return found.version, found.checks


NO_HA_READ = Unknown("no --patroni-url given: PostgreSQL does not say which HA manager, if any, runs it")


def examine(dsn: str, hung_after_s: float = 3600, ha: Patroni | None | Unknown = NO_HA_READ) -> Examined:
    """run_doctor's visit, also returning the facts a stack description keeps (ha: what the caller read of the HA
    manager, which PostgreSQL cannot tell). The preflight's look (lab/preflight/postgres.py) runs first on the
    same session: what sits at the DSN, its guards and its pooler; the checks then read the rest."""
    url = parse_pg_dsn(dsn)
    if url.query.get("target_session_attrs") == "read-write":
        # libpq tells read-write by transaction_read_only, which the doctor's own read-only transactions set: it
        # would refuse every server. "primary" (libpq 14+) asks pg_is_in_recovery() instead and finds the same server.
        url = url.update_query_dict({"target_session_attrs": "primary"})
    # Nothing pinned: the doctor reports what the server gives a session. Every transaction is BEGIN READ ONLY.
    engine = look_engine(url, "locklab-doctor")
    try:
        reading = engine.execution_options(postgresql_readonly=True)
        with connect_or_unreachable(reading, "postgres", url) as conn:
            # Read-only is the doctor's promise: it must hold through whatever sits in between.
            read_only = conn.execute(text("show transaction_read_only")).scalar()
            conn.commit()
            if read_only != "on":
                raise ServiceError(f"postgres at {redact(url)}: the doctor's transactions are not read-only "
                                   f"(transaction_read_only = {read_only}); the doctor will not run")
            looked = look_on(engine, reading, conn, url)
            checks = [check_guards(conn), check_holders(conn, hung_after_s), check_keepalives(conn),
                      check_pooler(looked.pooler), check_waiters(conn)]
            replication = replication_fact(conn)
            conn.rollback()
    finally:
        engine.dispose()
    unread = Unknown("not in this server")
    version = looked.state.version
    postgres = Postgres(version, looked.guards.get("idle_in_transaction_session_timeout", unread),
                        looked.guards.get("idle_session_timeout", unread), pooler_mode(looked.pooler),
                        looked.pooler.kind, replication, ha)
    return Examined(version, checks, postgres, looked.finding)


def as_json(dsn: str, version: str, checks: list[Check]) -> dict:
    return {"server": redact(parse_pg_dsn(dsn)), "server_version": version,
            "status": worst(checks), "checks": [asdict(c) for c in checks]}


_SEVERITY = {"pass": 0, "warn": 1, "fail": 2}


def _worst(statuses: list[str]) -> str:
    return max(statuses, key=lambda status: _SEVERITY[status], default="pass")


def worst(checks: list[Check]) -> str:
    return _worst([c.status for c in checks])
