"""`lab doctor` on MariaDB: its idle guards, its GET_LOCK holders and its waiters' bounds, reading only.

The same questions `lab doctor` asks a PostgreSQL (lab/doctor/postgres.py), in MariaDB's words: idle_transaction_timeout
(and its read-only and write forms) for the post's idle_in_transaction_session_timeout, wait_timeout for
idle_session_timeout, with where each value comes from (information_schema.system_variables' origin) and what
init_connect sets for users without SUPER. The session is read-only (tx_read_only, set before its first
statement, and checked) and runs only SELECT and SHOW.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from lab.doctor.postgres import Check, _rows, _worst, connect_or_unreachable
from lab.errors import ServiceError
from lab.servers.clients import first_line, parse_mariadb_url, redact
from lab.servers.mariadb.sql import mariadb_engine

GUARDS = ("idle_transaction_timeout", "idle_readonly_transaction_timeout", "idle_write_transaction_timeout",
          "wait_timeout")
DEFAULT_WAIT_TIMEOUT = 28800  # MariaDB's own default: 8 hours
MEASURED = ("measured here (lab run --scenario cases): SELECT GET_LOCK() opens no transaction, so on a default "
            "connection the lock survives idle_transaction_timeout until the connection reads a table, and is then "
            "lost; wait_timeout ends an idle session whatever its transaction state")


def is_mariadb_dsn(dsn: str) -> bool:
    """Whether a DSN names a MariaDB (mysql:// or mariadb://, any driver) rather than a PostgreSQL."""
    return dsn.split("://", 1)[0].split("+", 1)[0] in ("mysql", "mariadb")


def check_guards(conn: Connection) -> Check:
    sql = ("select lower(variable_name) as name, global_value, session_value, global_value_origin as origin "
           "from information_schema.system_variables where lower(variable_name) in :names order by 1")
    init_sql = "select @@global.init_connect as init_connect"
    rows = [dict(r._mapping) for r in conn.execute(text(sql).bindparams(names=GUARDS))]
    evidence = [f"{r['name']} = {r['session_value']} s for this session (global {r['global_value']}, origin "
                f"{r['origin']})" for r in rows]
    init = _rows(conn, init_sql)[0]["init_connect"] or ""
    if any(name in init.lower() for name in GUARDS):
        evidence.append(f"init_connect sets a guard for every user without SUPER: {init}")
    values = {r["name"]: int(r["session_value"] or 0) for r in rows}
    what = {"idle_transaction_timeout": "idle in any transaction: a default (autocommit off) connection is in one "
                                        "once it has read a table",
            "idle_readonly_transaction_timeout": "idle in a transaction that only read",
            "idle_write_transaction_timeout": "idle in a transaction that wrote"}
    parts = [f"{name} = {values[name]} s ends a GET_LOCK session {why}" for name, why in what.items() if values.get(name)]
    wait = values.get("wait_timeout", DEFAULT_WAIT_TIMEOUT)
    if wait < DEFAULT_WAIT_TIMEOUT:
        parts.append(f"wait_timeout = {wait} s (below the default {DEFAULT_WAIT_TIMEOUT} s) ends every idle session "
                     f"and its GET_LOCK, in a transaction or not, AUTOCOMMIT too")
    evidence.append(MEASURED)
    if not parts:
        return Check("idle guards", "pass", f"no idle-transaction guard is set; wait_timeout is {wait} s (a lock "
                     f"connection idle that long still loses its lock)", evidence, [sql, init_sql])
    return Check("idle guards", "warn", "; ".join(parts), evidence, [sql, init_sql])


def check_holders(conn: Connection, hung_after_s: float) -> Check:
    """Sessions holding a GET_LOCK, from performance_schema (MariaDB keeps user locks there when it is on)."""
    sql = ("select t.processlist_id as id, t.processlist_command as command, t.processlist_time as in_state_s, "
           "m.object_name as lock_name from performance_schema.metadata_locks m "
           "join performance_schema.threads t on t.thread_id = m.owner_thread_id "
           "where m.object_type = 'USER LEVEL LOCK' and m.lock_status = 'GRANTED'")
    enabled_sql = "select @@performance_schema as on_"
    if not _rows(conn, enabled_sql)[0]["on_"]:
        return Check("GET_LOCK holders", "warn", "performance_schema is off (MariaDB's default), so no session's "
                     "GET_LOCK can be listed: the holders are not checked", [], [enabled_sql])
    try:
        rows = _rows(conn, sql)
    except SQLAlchemyError as exc:
        return Check("GET_LOCK holders", "warn", f"performance_schema's metadata_locks could not be read: "
                     f"{first_line(exc)}", [], [enabled_sql, sql])
    if not rows:
        return Check("GET_LOCK holders", "pass", "no session holds a GET_LOCK", [], [enabled_sql, sql])
    evidence = [f"connection {r['id']}: {r['command']} for {r['in_state_s']} s, holds {r['lock_name']}" for r in rows]
    hung = [r for r in rows if (r["in_state_s"] or 0) > hung_after_s]
    if hung:
        return Check("GET_LOCK holders", "warn", f"{len(hung)} session(s) have been in their state over "
                     f"{hung_after_s:g} s while holding a GET_LOCK: a hung run?", evidence, [enabled_sql, sql])
    return Check("GET_LOCK holders", "pass", f"{len(rows)} session(s) hold a GET_LOCK", evidence, [enabled_sql, sql])


def check_waiters(conn: Connection) -> Check:
    sql = ("select lower(variable_name) as name, session_value from information_schema.system_variables "
           "where lower(variable_name) in ('innodb_lock_wait_timeout', 'lock_wait_timeout', 'max_statement_time') "
           "order by 1")
    rows = _rows(conn, sql)
    evidence = [f"{r['name']} = {r['session_value']}" for r in rows]
    values = {r["name"]: float(r["session_value"] or 0) for r in rows}
    return Check("waiter timeouts", "pass", f"a waiter for a row lock gives up after innodb_lock_wait_timeout = "
                 f"{values.get('innodb_lock_wait_timeout', 50):g} s (MariaDB has no unbounded row-lock wait), and "
                 f"GET_LOCK(name, timeout) waits as long as its own timeout says", evidence, [sql])


def run_doctor(dsn: str, hung_after_s: float = 3600) -> tuple[str, list[Check]]:
    """Connect read-only and run every check; ServiceError when the server cannot be reached."""
    url = parse_mariadb_url(dsn)
    # pin=False: the doctor reports what the server gives a session, so it must not pin anything itself.
    engine = mariadb_engine(url, {"tx_read_only": 1}, pin=False, poolclass=NullPool)
    try:
        with connect_or_unreachable(engine, "mariadb", url) as conn:
            version = str(conn.execute(text("select version()")).scalar_one())
            if conn.execute(text("select @@tx_read_only")).scalar() != 1:
                raise ServiceError(f"mariadb at {redact(url)}: the doctor's session is not read-only; it will not run")
            checks = [check_guards(conn), check_holders(conn, hung_after_s), check_waiters(conn)]
            conn.rollback()
    finally:
        engine.dispose()
    return version, checks


def as_json(dsn: str, version: str, checks: list[Check]) -> dict:
    from dataclasses import asdict

    return {"server": redact(parse_mariadb_url(dsn)), "server_version": version,
            "status": _worst([c.status for c in checks]), "checks": [asdict(c) for c in checks]}
