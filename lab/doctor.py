"""`lab doctor`: check a real PostgreSQL for the post's hidden-expiry traps, reading only.

The session is opened with default_transaction_read_only=on and runs only SELECT and SHOW,
so it is safe to point at production. Each check returns pass / warn / fail with the
evidence and the SQL it ran, so an operator can re-run it by hand.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from sqlalchemy import text
from sqlalchemy.engine import Connection

from lab.errors import ServiceError
from lab.servers.clients import first_line, parse_pg_dsn, pg_engine, redact

GUARDS = ("idle_in_transaction_session_timeout", "idle_session_timeout")
LINUX_KEEPALIVE = (7200, 75, 9)  # tcp_keepalive_time, intvl, probes when the server leaves them at 0


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
    settings_sql = ("select name, setting, unit, source from pg_settings where name in "
                    "('idle_in_transaction_session_timeout', 'idle_session_timeout') order by name")
    scoped_sql = ("select coalesce(d.datname, '(every database)') as database, "
                  "coalesce(r.rolname, '(every role)') as role, s.setconfig "
                  "from pg_db_role_setting s left join pg_database d on d.oid = s.setdatabase "
                  "left join pg_roles r on r.oid = s.setrole")
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
    sql = "select name, setting from pg_settings where name like 'tcp_keepalives_%' order by name"
    values = {r["name"]: int(r["setting"]) for r in _rows(conn, sql)}
    idle = values.get("tcp_keepalives_idle", 0) or LINUX_KEEPALIVE[0]
    interval = values.get("tcp_keepalives_interval", 0) or LINUX_KEEPALIVE[1]
    count = values.get("tcp_keepalives_count", 0) or LINUX_KEEPALIVE[2]
    total = idle + interval * count
    evidence = [f"{k} = {v}" + (" (0: the OS default)" if v == 0 else "") for k, v in values.items()]
    summary = (f"a holder whose host drops off the network keeps its session lock for about "
               f"{total // 3600} h {total % 3600 // 60} min ({idle} s + {count} probes x {interval} s)")
    return Check("TCP keepalives", "warn" if total > 3600 else "pass", summary, evidence, [sql])


def check_pooler(conn: Connection, dsn_host: str | None, dsn_port: int | None) -> Check:
    pid_sql = "select pg_backend_pid()"
    addr_sql = "select inet_server_addr()::text as addr, inet_server_port() as port"
    first = conn.execute(text(pid_sql)).scalar()
    conn.commit()
    second = conn.execute(text(pid_sql)).scalar()
    conn.commit()
    where = _rows(conn, addr_sql)[0]
    evidence = [f"backend pid in two consecutive transactions: {first}, {second}",
                f"server sees this session on {where['addr']}:{where['port']}; the DSN names {dsn_host}:{dsn_port}"]
    if first != second:
        return Check("connection pooler", "fail", "consecutive transactions ran on different server sessions: "
                     "transaction pooling (e.g. pgbouncer), where session advisory locks do not work; "
                     "use transaction-level locks", evidence, [pid_sql, addr_sql])
    if where["port"] is not None and dsn_port is not None and where["port"] != dsn_port:
        return Check("connection pooler", "warn", "the server listens on another port than the DSN names: "
                     "something (a pooler or proxy) sits in between", evidence, [pid_sql, addr_sql])
    return Check("connection pooler", "pass", "one session per connection, no sign of a pooler in between",
                 evidence, [pid_sql, addr_sql])


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


def run_doctor(dsn: str, hung_after_s: float = 3600) -> tuple[str, list[Check]]:
    """Connect read-only and run every check; ServiceError when the server cannot be reached."""
    url = parse_pg_dsn(dsn)
    # pin=False: the doctor reports what the server gives a session, so it must not pin anything itself.
    engine = pg_engine(url, {"default_transaction_read_only": "on"}, pin=False, poolclass=None,
                       connect_args={"application_name": "locklab-doctor"})
    try:
        try:
            conn = engine.connect()
        except Exception as exc:
            raise ServiceError(f"postgres at {redact(url)} is unreachable: {first_line(exc)}") from None
        with conn:
            version = conn.execute(text("show server_version")).scalar()
            conn.commit()
            checks = [check_guards(conn), check_holders(conn, hung_after_s), check_keepalives(conn),
                      check_pooler(conn, url.host, url.port), check_waiters(conn)]
            conn.rollback()
    finally:
        engine.dispose()
    return version, checks


def as_json(dsn: str, version: str, checks: list[Check]) -> dict:
    return {"server": redact(parse_pg_dsn(dsn)), "server_version": version,
            "status": worst(checks), "checks": [asdict(c) for c in checks]}


def _worst(statuses: list[str]) -> str:
    return max(statuses, key={"pass": 0, "warn": 1, "fail": 2}.get, default="pass")


def worst(checks: list[Check]) -> str:
    return _worst([c.status for c in checks])
