"""What MariaDB says about a session (its state, its named locks, its end), and the engines the lab reaches it by.

Every lab session pins at connect time each setting a scenario relies on (PINNED): MariaDB's idle guards off,
wait_timeout and innodb_lock_wait_timeout at their defaults, unless the session is given its own value (a
holder's guard), as the lab's PostgreSQL sessions pin theirs (lab/servers/clients.py, pg_engine). A server the
lab did not start may set any of them globally; the pin keeps a verdict the same there. Observation runs on a
separate AUTOCOMMIT session, never the holder's, so looking cannot change what is looked at.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Mapping

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from lab.servers.mariadb.server import aborted_connections

# setting -> the value a lab session holds unless it is given its own: the three idle guards off (0), and the
# server's defaults of the two timeouts a server may have lowered (28800 s idle, 50 s for a row lock).
PINNED: dict[str, int] = {"idle_transaction_timeout": 0, "idle_readonly_transaction_timeout": 0,
                          "idle_write_transaction_timeout": 0, "wait_timeout": 28800,
                          "innodb_lock_wait_timeout": 50, "max_statement_time": 0}
CONNECT_TIMEOUT = 5
_NAME = re.compile(r"^[a-z_]+$")

_KNOWN: dict[tuple, frozenset] = {}  # (host, port, user) -> the pinned names that server knows
_KNOWN_LOCK = threading.Lock()


def known_variables(url: URL) -> frozenset[str]:
    """Which PINNED names this server knows (a MySQL has no idle_transaction_timeout), asked once per server."""
    key = (url.host, url.port, url.username)
    with _KNOWN_LOCK:
        if key in _KNOWN:
            return _KNOWN[key]
    engine = create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT})
    try:
        with engine.connect() as conn:
            names = frozenset(conn.execute(text(
                "select lower(variable_name) from information_schema.session_variables "
                "where lower(variable_name) in :names").bindparams(names=tuple(PINNED))).scalars())
    finally:
        engine.dispose()
    with _KNOWN_LOCK:
        _KNOWN[key] = names
    return names


def init_command(settings: Mapping[str, int | float | str]) -> str | None:
    """One `SET SESSION a = 1, b = 2` for these settings (whole seconds, as MariaDB takes its timeouts), or None."""
    if not settings:
        return None
    parts = []
    for name, value in settings.items():
        if not _NAME.match(name):
            raise ValueError(f"not a MariaDB variable name: {name!r}")
        parts.append(f"{name} = {int(value)}")  # an int: nothing else reaches the statement
    return "set session " + ", ".join(parts)


def mariadb_engine(url: URL, settings: Mapping[str, int | float | str] | None = None, *, pin: bool = True,
                   **kwargs) -> Engine:
    """An engine whose every session starts with these settings (PyMySQL's init_command, run before the session's
    first statement and opening no transaction), every other PINNED setting the server knows at its pinned value.
    pin=False leaves the server's values, for reading what it would give a session."""
    connect_args = dict(kwargs.pop("connect_args", {}))
    connect_args.setdefault("connect_timeout", CONNECT_TIMEOUT)
    startup = {name: int(value) for name, value in (settings or {}).items()}
    if pin:
        startup.update({name: PINNED[name] for name in sorted(known_variables(url)) if name not in startup})
    command = init_command(startup)
    if command is not None:
        connect_args["init_command"] = command
    return create_engine(url, connect_args=connect_args, **kwargs)


_UNPOOLED: dict[tuple, Engine] = {}
_UNPOOLED_LOCK = threading.Lock()


def unpooled_engine(url: URL, settings: Mapping[str, int | float | str] | None = None) -> Engine:
    """An engine that pools nothing (each connect() a session of its own, closed for good), one per address and
    settings in a process: SQLAlchemy asks a new engine's server half a dozen questions on its first connection
    (version, sql_mode, ...), which a lock connection made per run, per probe, need not pay again."""
    key = (url.render_as_string(hide_password=False), tuple(sorted((settings or {}).items())))
    with _UNPOOLED_LOCK:
        if key not in _UNPOOLED:
            _UNPOOLED[key] = mariadb_engine(url, settings, poolclass=NullPool)
        return _UNPOOLED[key]


def monitor_engine(url: URL) -> Engine:
    """An AUTOCOMMIT engine for observation and faults (pre-ping: a restart ends its sessions too)."""
    return mariadb_engine(url, pool_size=4, max_overflow=24, pool_pre_ping=True, isolation_level="AUTOCOMMIT")


def writes_engine(url: URL, settings: Mapping[str, int | float | str] | None = None) -> Engine:
    """A plain pooled engine for the runs' write transactions."""
    return mariadb_engine(url, settings, pool_size=8, max_overflow=32, pool_pre_ping=True)


def version(url: URL) -> str:
    """The server's version: the reachability check."""
    engine = create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT})
    try:
        with engine.connect() as conn:
            return str(conn.execute(text("select version()")).scalar_one())
    finally:
        engine.dispose()


def connection_id(conn) -> int:
    """CONNECTION_ID() of a SQLAlchemy connection's session (the processlist's id, KILL's argument)."""
    return int(conn.execute(text("select connection_id()")).scalar_one())


def session_state(monitor: Engine, connection: int | None) -> str:
    """A session as the server shows it: 'gone' (no processlist row), 'idle in transaction' (asleep with an InnoDB
    transaction open), 'idle' (asleep, none open), or its command ('Query', 'Killed' ...) while it works.

    The transaction is read from SHOW ENGINE INNODB STATUS, which InnoDB writes when asked: its
    information_schema.innodb_trx comes from a cache that is refreshed only once nobody has read it for 100 ms
    (trx0i_s.cc, can_cache_be_updated), so under the lab's polling it can stay stale for a whole trial."""
    command = _settled_command(monitor, connection)
    if command is None:
        return "gone"
    if command != "Sleep":
        return command
    return "idle in transaction" if connection in innodb_transactions(monitor) else "idle"


def innodb_transactions(monitor: Engine) -> dict[int, bool]:
    """connection id -> whether its transaction waits for a lock, for every session with an InnoDB transaction
    started, from SHOW ENGINE INNODB STATUS (needs the PROCESS privilege)."""
    with monitor.connect() as conn:
        status = str(conn.execute(text("show engine innodb status")).one()[2])
    listed = status.partition("LIST OF TRANSACTIONS FOR EACH SESSION:")[2].partition("\n--------\nFILE I/O")[0]
    found = {}
    for block in listed.split("---TRANSACTION ")[1:]:
        thread = re.search(r"MariaDB thread id (\d+)", block)
        if thread is not None and "not started" not in block.partition("\n")[0]:
            found[int(thread.group(1))] = "LOCK WAIT" in block
    return found


def _settled_command(monitor: Engine, connection: int | None, within: float = 0.5, every: float = 0.01) -> str | None:
    """The session's COMMAND once its last statement has finished on the server: MariaDB sends a statement's
    result before it sets the thread back to 'Sleep', so a client that has its answer can still be listed as
    'Query' for a moment (seen once in CI: the holder read 'Query' right after its GET_LOCK returned). A session
    that still works after `within` is reported as it is."""
    deadline = time.monotonic() + within
    command = _command(monitor, connection)
    while command == "Query" and time.monotonic() < deadline:
        time.sleep(every)  # no event says a statement's thread went back to sleep: the processlist is asked again
        command = _command(monitor, connection)
    return command


def _command(monitor: Engine, connection: int | None) -> str | None:
    """The processlist's COMMAND of a session ('Sleep', 'Query' ...), None when there is no such session."""
    with monitor.connect() as conn:
        command = conn.execute(text("select command from information_schema.processlist where id = :i"),
                               {"i": connection}).scalar()
    return None if command is None else str(command)


def wait_gone(monitor: Engine, connection: int | None, within: float = 10.0, every: float = 0.02) -> float | None:
    """Seconds until the processlist shows the session gone (None if it is still there after `within`)."""
    start = time.monotonic()
    while _command(monitor, connection) is not None:
        if time.monotonic() - start > within:
            return None
        time.sleep(every)  # no event says a session ended: the processlist is asked again
    return time.monotonic() - start


def kill(monitor: Engine, connection: int) -> bool:
    """KILL CONNECTION: the session ends and every lock it holds with it. False when there is no such session."""
    try:
        with monitor.connect() as conn:
            conn.execute(text(f"kill connection {int(connection)}"))
        return True
    except OperationalError as exc:
        if getattr(exc.orig, "args", (None,))[0] == 1094:  # ER_NO_SUCH_THREAD
            return False
        raise


def lock_holder(monitor: Engine, name: str) -> int | None:
    """IS_USED_LOCK: the connection id holding a named lock (GET_LOCK), or None when nobody does."""
    with monitor.connect() as conn:
        holder = conn.execute(text("select is_used_lock(:k)"), {"k": name}).scalar()
    return None if holder is None else int(holder)


def waiting_on_lock(monitor: Engine, connection: int) -> bool:
    """Whether the session waits for a row lock (its InnoDB transaction in LOCK WAIT) or a named lock (GET_LOCK)."""
    if innodb_transactions(monitor).get(connection):
        return True
    with monitor.connect() as conn:
        return bool(conn.execute(text("select count(*) from information_schema.processlist where id = :i "
                                      "and state = 'User lock'"), {"i": connection}).scalar())


def blocks_another(monitor: Engine, connection: int) -> bool:
    """Whether another session's InnoDB transaction waits for a row lock this session's transaction holds.

    Read from information_schema.innodb_lock_waits, InnoDB's cached view (see session_state): it may be stale by as
    long as others keep reading it, so a caller may see a wait late, never one that did not happen to this
    session's transaction at some point."""
    with monitor.connect() as conn:
        return bool(conn.execute(text(
            "select exists(select 1 from information_schema.innodb_lock_waits w "
            "join information_schema.innodb_trx t on t.trx_id = w.blocking_trx_id "
            "where t.trx_mysql_thread_id = :i)"), {"i": connection}).scalar())


def client_port(monitor: Engine, connection: int) -> int | None:
    """The client port the server sees for a session (the processlist's HOST is address:port over TCP)."""
    with monitor.connect() as conn:
        host = conn.execute(text("select host from information_schema.processlist where id = :i"),
                            {"i": connection}).scalar()
    port = str(host or "").rpartition(":")[2]
    return int(port) if port.isdigit() else None


def why_session_ended(log_path: Path | None, connection: int | None) -> str | None:
    """The server log's reason for ending a session ("Got timeout reading communication packets": an idle guard),
    or None when the log cannot be read (a server the lab did not start) or says nothing of it."""
    said = aborted_connections(log_path, connection)
    return said[-1] if said else None


def uptime_s(monitor: Engine) -> int:
    """How long the server process has run, in seconds (its global status Uptime)."""
    with monitor.connect() as conn:
        return int(conn.execute(text("select variable_value from information_schema.global_status "
                                     "where variable_name = 'UPTIME'")).scalar_one())
