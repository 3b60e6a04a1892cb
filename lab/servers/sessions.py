"""What a SQL server says about one of its sessions, whichever server it is: PostgreSQL or MariaDB.

A trial's monitor engine is on the server its lock's company rows live on (a backend's writes_to), so a scenario
asks here, and the engine's dialect picks PostgreSQL's answer (lab/servers/postgres/sql.py: pg_stat_activity, pg_locks,
pg_terminate_backend) or MariaDB's (lab/servers/mariadb/sql.py: the processlist, innodb_trx, KILL CONNECTION).
A session is named by its server's number for it: a PostgreSQL backend pid, a MariaDB connection id.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection, Engine

from lab.servers.mariadb import sql as mariadb_sql
from lab.servers.postgres import sql as pg
from lab.servers.services import Services

# SQLAlchemy's dialect name -> the lab's service name
_SERVICE = {"postgresql": "postgres", "mariadb": "mariadb"}


def service_of(engine: Engine | Connection) -> str:
    """The lab's name of the SQL service an engine or a connection talks to ("postgres", "mariadb")."""
    name = engine.dialect.name
    if name not in _SERVICE:
        raise ValueError(f"the lab keeps company rows on PostgreSQL or MariaDB, not {name}")
    return _SERVICE[name]


def on_mariadb(engine: Engine | Connection) -> bool:
    return service_of(engine) == "mariadb"


def session_id(conn: Connection) -> int:
    """The server's number for a SQLAlchemy connection's session, with no round trip: libpq's backend pid, or the
    connection id MariaDB sent in its handshake."""
    if on_mariadb(conn):
        return int(conn.connection.dbapi_connection.thread_id())  # type: ignore[union-attr]  # a live connection's
    return pg.backend_pid(conn)


def state(monitor: Engine, session: int | None) -> str:
    """'idle', 'idle in transaction', 'gone' (no such session), or what the session is doing."""
    return mariadb_sql.session_state(monitor, session) if on_mariadb(monitor) else pg.session_state(monitor, session)


def wait_gone(monitor: Engine, session: int | None, within: float = 10.0) -> float | None:
    """Seconds until the server shows the session gone; None if it is still there after `within`."""
    if on_mariadb(monitor):
        return mariadb_sql.wait_gone(monitor, session, within=within)
    return pg.wait_gone(monitor, session, within=within)


def terminate(monitor: Engine, session: int) -> bool:
    """End one session as an administrator would (pg_terminate_backend, KILL CONNECTION); False: no such session."""
    return mariadb_sql.kill(monitor, session) if on_mariadb(monitor) else pg.terminate(monitor, session)


def terminate_call(monitor: Engine) -> str:
    """What terminate() runs, in the server's words, for evidence and the report."""
    return "KILL CONNECTION" if on_mariadb(monitor) else "pg_terminate_backend"


def waiting_on_lock(monitor: Engine, session: int) -> bool:
    """Whether the session is blocked on a lock (a row, an advisory or named lock)."""
    return mariadb_sql.waiting_on_lock(monitor, session) if on_mariadb(monitor) else pg.waiting_on_lock(monitor, session)


def blocks_another(monitor: Engine, session: int) -> bool:
    """Whether another session waits on a lock this one holds."""
    return mariadb_sql.blocks_another(monitor, session) if on_mariadb(monitor) else pg.blocks_another(monitor, session)


def why_ended(services: Services, monitor: Engine, session: int | None) -> str | None:
    """The server log's own reason for ending the session, where the lab runs that server and can read its log."""
    if on_mariadb(monitor):
        return mariadb_sql.why_session_ended(services.mariadb_log, session)
    return pg.why_session_ended(services.pg_log, session)


def client_port(monitor: Engine, session: int) -> int | None:
    """The client port the server sees for a session: which connection of a proxy carries it."""
    if on_mariadb(monitor):
        return mariadb_sql.client_port(monitor, session)
    from sqlalchemy import text

    with monitor.connect() as conn:
        return conn.execute(text("select client_port from pg_stat_activity where pid = :p"), {"p": session}).scalar()
