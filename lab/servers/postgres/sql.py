"""What PostgreSQL itself says about a session: its state, its advisory locks, its end.

These run on a separate monitor session, never on the holder's, so that looking
cannot change what is looked at (a query on a default connection opens a transaction).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Engine

from lab.servers.clients import PINNED_SETTINGS, pg_engine
from lab.servers.services import Services

_ADVISORY_HELD = text(
    "select count(*) from pg_locks where locktype = 'advisory' and granted and pid = :pid "
    "and objsubid = 1 and ((classid::bigint << 32) | objid::bigint) = :key")


def monitor_engine(services: Services) -> Engine:
    """An AUTOCOMMIT engine for observation and faults, shared by the trials of a run."""
    # pre-ping: a restart fault ends every session, the monitor's included.
    return pg_engine(services.pg(), pool_size=8, max_overflow=24, pool_pre_ping=True,
                     isolation_level="AUTOCOMMIT", connect_args={"application_name": "locklab-monitor"})


def writes_engine(services: Services) -> Engine:
    """A plain pooled engine for the runs' write transactions."""
    return pg_engine(services.pg(), pool_size=8, max_overflow=32, pool_pre_ping=True,
                     connect_args={"application_name": "locklab-writes"})


def trial_engines(url) -> tuple[Engine, Engine]:
    """A monitor (AUTOCOMMIT) and a writes engine, two sessions each, for a trial on servers of its own or on a
    service it fails over; pre-ping, since the fault ends their sessions. The caller disposes both."""
    monitor = pg_engine(url, isolation_level="AUTOCOMMIT", pool_pre_ping=True, pool_size=2,
                        connect_args={"application_name": "locklab-monitor"})
    writes = pg_engine(url, pool_pre_ping=True, pool_size=2, connect_args={"application_name": "locklab-writes"})
    return monitor, writes


def dispose(*engines: Engine | None) -> None:
    """Close every pooled connection of these engines; None stands for one a trial never got to make."""
    for engine in engines:
        if engine is not None:
            engine.dispose()


def holds_advisory_lock(monitor: Engine, pid: int, key: int) -> bool:
    """True when pg_locks shows session pid holding the advisory lock on key."""
    with monitor.connect() as conn:
        return conn.execute(_ADVISORY_HELD, {"pid": pid, "key": key}).scalar_one() > 0


def session_state(monitor: Engine, pid: int | None) -> str:
    """pg_stat_activity.state of a session ('idle', 'idle in transaction', ...), or 'gone' (pid None: no row)."""
    with monitor.connect() as conn:
        state = conn.execute(text("select state from pg_stat_activity where pid = :pid"),
                             {"pid": pid}).scalar()
    return state or "gone"


def wait_gone(monitor: Engine, pid: int | None, within: float = 10.0, every: float = 0.02) -> float | None:
    """Seconds until the server shows session pid gone (None if it is still there after `within`).

    There is no event for a session's end, so this asks pg_stat_activity every `every` seconds.
    """
    start = time.monotonic()
    while session_state(monitor, pid) != "gone":
        if time.monotonic() - start > within:
            return None
        time.sleep(every)
    return time.monotonic() - start


def terminate(monitor: Engine, pid: int) -> bool:
    """pg_terminate_backend(pid): end one session, as a crash, a kill or a failover would."""
    with monitor.connect() as conn:
        return bool(conn.execute(text("select pg_terminate_backend(:pid)"), {"pid": pid}).scalar())


def server_version_num(monitor: Engine) -> int:
    with monitor.connect() as conn:
        return int(conn.execute(text("show server_version_num")).scalar_one())


def why_session_ended(log_path: Path | None, pid: int | None) -> str | None:
    """The server's own reason for ending session pid, from its log (embedded servers only).

    The client only sees "server closed the connection unexpectedly"; the server log says
    "terminating connection due to idle-in-transaction timeout" and the like.
    """
    if log_path is None or pid is None:
        return None
    try:
        log = log_path.read_text(errors="replace")
    except OSError:
        return None
    pattern = re.compile(rf"\[{pid}\] FATAL:\s+(.*)")
    reasons = pattern.findall(log)
    return reasons[-1].strip() if reasons else None


def backend_pid(conn) -> int:
    """The server pid of a SQLAlchemy connection's session, read from libpq (no round trip)."""
    return backend_pid_of(conn.connection.dbapi_connection)


def backend_pid_of(dbapi_connection) -> int:
    """The session's pid from a driver's connection: psycopg2 has get_backend_pid(), psycopg 3 keeps it in .info."""
    if hasattr(dbapi_connection, "get_backend_pid"):
        return int(dbapi_connection.get_backend_pid())
    return int(dbapi_connection.info.backend_pid)


def waiting_on_lock(monitor: Engine, pid: int) -> bool:
    """True while session pid is blocked on a lock (an advisory lock, a row, a transaction id)."""
    with monitor.connect() as conn:
        return conn.execute(text("select wait_event_type = 'Lock' from pg_stat_activity where pid = :pid"),
                            {"pid": pid}).scalar() is True


def blocks_another(monitor: Engine, pid: int) -> bool:
    """True while another session waits on a lock that session pid holds (pg_blocking_pids names it)."""
    with monitor.connect() as conn:
        return conn.execute(text("select exists (select 1 from pg_stat_activity where :pid = any(pg_blocking_pids(pid)))"),
                            {"pid": pid}).scalar() is True


def holds_advisory_pair(monitor: Engine, pid: int, key1: int, key2: int) -> bool:
    """Like holds_advisory_lock, for the two-int form pg_advisory_lock(int, int) (objsubid 2)."""
    with monitor.connect() as conn:
        return conn.execute(text("select count(*) from pg_locks where locktype = 'advisory' and granted "
                                 "and pid = :pid and objsubid = 2 and classid = :a and objid = :b"),
                            {"pid": pid, "a": key1, "b": key2}).scalar_one() > 0


# Settings per database and per role (ALTER DATABASE / ALTER ROLE ... SET): every one, and whether it reaches a
# session of this database (here) and of this role (mine). pg_db_role_setting is readable by every role.
SCOPED_SETTINGS_SQL = ("select d.datname as database, r.rolname as role, s.setconfig, "
                       "s.setdatabase = 0 or d.datname = current_database() as here, "
                       "s.setrole = 0 or r.rolname = current_user as mine "
                       "from pg_db_role_setting s left join pg_database d on d.oid = s.setdatabase "
                       "left join pg_roles r on r.oid = s.setrole")


@dataclass(frozen=True)
class ScopedSetting:
    """One setting a database or a role carries (pg_db_role_setting)."""

    database: str | None  # None: every database
    role: str | None  # None: every role
    name: str
    value: str
    here: bool  # it reaches sessions of the current database
    mine: bool  # ... and of the current role

    @property
    def scope(self) -> str:
        """"database app, role (every role)": where it is set, as the doctor words it."""
        return f"database {self.database or '(every database)'}, role {self.role or '(every role)'}"

    @property
    def statement(self) -> str:
        """The statement that sets it, as a DBA would type it (and RESET in its place undoes it)."""
        if self.database and self.role:
            return f"ALTER ROLE {ident(self.role)} IN DATABASE {ident(self.database)} SET {self.name}"
        if self.role:
            return f"ALTER ROLE {ident(self.role)} SET {self.name}"
        if self.database:
            return f"ALTER DATABASE {ident(self.database)} SET {self.name}"
        return f"ALTER ROLE ALL SET {self.name}"


def ident(name: str) -> str:
    """A name as SQL needs it written: bare when it may be, else double-quoted."""
    return name if re.fullmatch(r"[a-z_][a-z0-9_$]*", name) else '"' + name.replace('"', '""') + '"'


def scoped_settings(conn, names=None) -> list[ScopedSetting]:
    """The settings per database and per role on this server (only those named, when names are given)."""
    found = []
    for row in conn.execute(text(SCOPED_SETTINGS_SQL)).mappings():
        for item in row["setconfig"] or []:
            name, _, value = item.partition("=")
            if names is None or name in names:
                found.append(ScopedSetting(row["database"], row["role"], name, value, bool(row["here"]),
                                           bool(row["mine"])))
    return found


def settings_in_force(url) -> dict:
    """What the server gives a session that does not pin anything: each pinned setting's value and source,
    and the per-database and per-role settings that touch them (pg_db_role_setting)."""
    engine = pg_engine(url, pin=False, poolclass=None)
    try:
        with engine.connect() as conn:
            values = {row.name: f"{row.setting}{row.unit or ''} ({row.source})" for row in conn.execute(
                text("select name, setting, unit, source from pg_settings where name = any(:n) order by name"),
                {"n": list(PINNED_SETTINGS)})}
            scoped = [f"{s.database or 'every database'}/{s.role or 'every role'}: {s.name}={s.value}"
                      for s in scoped_settings(conn, PINNED_SETTINGS)]
            conn.rollback()
        return {"server_gives": values, "set_per_database_or_role": scoped, "lab_sessions_pin": list(PINNED_SETTINGS)}
    finally:
        engine.dispose()


LINUX_KEEPALIVE = (7200, 75, 9)  # tcp_keepalive_time, intvl, probes when the server leaves them at 0
KEEPALIVE_SQL = "select name, setting from pg_settings where name like 'tcp_keepalives_%' order by name"


def keepalive_estimate(values: dict[str, int]) -> tuple[int, int, int, int]:
    """(seconds, idle, interval, count): how long the server keeps the session of a client that fell off the
    network, from its tcp_keepalives_* settings (0: the OS default). `lab doctor` says it; netdrop measures it."""
    idle = values.get("tcp_keepalives_idle", 0) or LINUX_KEEPALIVE[0]
    interval = values.get("tcp_keepalives_interval", 0) or LINUX_KEEPALIVE[1]
    count = values.get("tcp_keepalives_count", 0) or LINUX_KEEPALIVE[2]
    return idle + interval * count, idle, interval, count
