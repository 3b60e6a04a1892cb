"""The driver axis: one PostgreSQL connection made the way each Python driver or framework makes it.

The post's method 1 bug exists because psycopg2, and SQLAlchemy on it, open a transaction by
themselves, so a session lock's connection sits idle in transaction. Other stacks have other
defaults. A LockSession is one connection for a lock held on it, opened by one driver in its
default mode or in its autocommit mode, with the session settings a scenario gives it (and every
other setting the lab pins) in the startup packet, as the lab's own engines do.

Drivers: psycopg2 (through SQLAlchemy: the lab's default), psycopg (3, sync), asyncpg (no
implicit transaction), sqlalchemy+psycopg, sqlalchemy+asyncpg (SQLAlchemy's asyncio dialect
begins transactions itself although asyncpg does not), django (its ORM connection, autocommit by
default) and django_atomic (the same connection inside transaction.atomic()).
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import secrets
import threading
from abc import ABC, abstractmethod
from functools import lru_cache
from typing import Callable, Mapping

from sqlalchemy.engine import URL

from lab.errors import LabError
from lab.servers.clients import known_settings, pg_engine, pg_hosts
from lab.servers.pooler_settings import REFUSAL
from lab.servers.postgres.sql import backend_pid_of

DEFAULT = "psycopg2"
# name -> (the packages it needs, what it is)
DRIVERS = {
    "psycopg2": (("psycopg2",), "psycopg2 through SQLAlchemy: a transaction begins with the first statement"),
    "psycopg": (("psycopg",), "psycopg 3, plain connection: a transaction begins with the first statement"),
    "asyncpg": (("asyncpg",), "asyncpg: no transaction unless the code opens one"),
    "sqlalchemy+psycopg": (("sqlalchemy", "psycopg"), "SQLAlchemy on psycopg 3: autobegin"),
    "sqlalchemy+asyncpg": (("sqlalchemy", "asyncpg", "greenlet"), "SQLAlchemy's asyncio dialect on asyncpg: autobegin"),
    "django": (("django", "psycopg"), "Django's ORM connection: autocommit by default"),
    "django_atomic": (("django", "psycopg"), "Django's ORM connection inside transaction.atomic()"),
}


def missing(driver: str) -> list[str]:
    """The packages a driver needs that are not installed."""
    return [p for p in DRIVERS[driver][0] if importlib.util.find_spec(p) is None]


def resolve(spec: str | None) -> list[str]:
    """--driver: None -> the default, 'all' -> every installed driver, else names; LabError for a bad one."""
    if spec is None:
        return [DEFAULT]
    if spec == "all":
        return [d for d in DRIVERS if not missing(d)]
    names = [n.strip() for n in spec.split(",") if n.strip()]
    for name in names:
        if name not in DRIVERS:
            raise LabError(f"unknown driver {name!r}; drivers: {', '.join(DRIVERS)}")
        if missing(name):
            raise LabError(f"driver {name} needs {', '.join(missing(name))}: pip install -e '.[drivers]'")
    return names


class LockSession(ABC):
    """One connection for a lock: run a statement, commit, drop it."""

    @abstractmethod
    def one(self, sql: str, params: Mapping[str, object]) -> tuple:
        """Run sql (named :params) and return its first row."""

    @abstractmethod
    def commit(self) -> None:
        """End the open transaction, if the driver has one."""

    @abstractmethod
    def drop(self) -> None:
        """Close the connection without handing it to any pool (its session locks end with it)."""


def open_session(driver: str, url: URL, settings: Mapping[str, object], autocommit: bool) -> LockSession:
    """A new lock connection by driver, with the scenario's session settings and every other setting the
    lab pins (lab/servers/clients.py) in its startup packet, as the lab's own engines have them."""
    if driver in ("psycopg2", "sqlalchemy+psycopg"):
        return _SqlAlchemy(driver, url, dict(settings), autocommit)
    startup = dict(settings)
    startup.update({name: 0 for name in sorted(known_settings(url, {"connect_timeout": 5})) if name not in startup})
    opener: Callable[..., LockSession] = {"psycopg": _Psycopg, "asyncpg": _Asyncpg,
                                          "sqlalchemy+asyncpg": _SqlAlchemyAsync, "django": DjangoSession,
                                          "django_atomic": DjangoSession}[driver]
    return opener(driver, url, startup, autocommit)


def open_django(url: URL, settings: Mapping[str, object]) -> DjangoSession:
    """Django's own connection, autocommit as Django's default, under an alias of its own that a library built on
    Django's connections is handed (django-pglock's `using=`), with the settings open_session gives a lock's."""
    session = open_session("django", url, settings, autocommit=True)
    assert isinstance(session, DjangoSession)
    return session


def _options(startup: Mapping[str, object]) -> str:
    return " ".join(f"-c {name}={value}" for name, value in startup.items())


def _positional(sql: str, params: Mapping[str, object]) -> tuple[str, list]:
    """':k' named parameters as asyncpg's $1, $2 ..."""
    order: list[str] = []

    def number(match: re.Match) -> str:
        if match.group(1) not in order:
            order.append(match.group(1))
        return f"${order.index(match.group(1)) + 1}"

    return re.sub(r"(?<!:):(\w+)", number, sql), [params[name] for name in order]


def _pyformat(sql: str) -> str:
    """':k' named parameters as psycopg's %(k)s."""
    return re.sub(r"(?<!:):(\w+)", r"%(\1)s", sql)


@lru_cache(maxsize=64)
def _statement(sql: str):
    """SQLAlchemy's text() of sql, built once: building it on every call cost a session lock 64 us per pair."""
    from sqlalchemy import text

    return text(sql)


def _hosts(url: URL) -> tuple[str, str]:
    """libpq's host and port lists, for a URL with one host or several."""
    hosts = pg_hosts(url)
    return ",".join(h or "127.0.0.1" for h, _ in hosts), ",".join(str(p) for _, p in hosts)


class _SqlAlchemy(LockSession):
    """SQLAlchemy's Connection on psycopg2 or psycopg 3: autobegin, or AUTOCOMMIT."""

    def __init__(self, driver, url, settings, autocommit):
        dialect = "postgresql+psycopg2" if driver == "psycopg2" else "postgresql+psycopg"
        # The lab's engine factory: settings and pins in the startup packet, or per transaction via a pooler.
        self._engine = pg_engine(url.set(drivername=dialect), settings, pool_size=1, max_overflow=0)
        conn = self._engine.connect()
        self._conn = conn.execution_options(isolation_level="AUTOCOMMIT") if autocommit else conn

    def one(self, sql, params):
        return tuple(self._conn.execute(_statement(sql), dict(params)).one())

    def commit(self):
        self._conn.commit()

    def drop(self):
        self._conn.invalidate()
        self._conn.close()
        self._engine.dispose()


class _Psycopg(LockSession):
    """A plain psycopg 3 connection: autocommit=False (its default) or True."""

    def __init__(self, driver, url, startup, autocommit):
        import psycopg

        host, port = _hosts(url)
        self._conn = psycopg.connect(host=host, port=port, user=url.username, password=url.password,
                                     dbname=url.database, options=_options(startup), connect_timeout=5,
                                     application_name="locklab", autocommit=autocommit)

    def one(self, sql, params):
        row = self._conn.execute(_pyformat(sql), dict(params)).fetchone()
        if row is None:  # every statement a lock session runs returns one row
            raise LookupError(f"no row from {sql!r}")
        return tuple(row)

    def commit(self):
        self._conn.commit()

    def drop(self):
        self._conn.close()


class _Loop:
    """An event loop on a thread of its own, so synchronous lab code can drive asyncio drivers."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="locklab-asyncio", daemon=True)
        self._thread.start()

    def run(self, coroutine, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


class _Asyncpg(LockSession):
    """A plain asyncpg connection: no implicit transaction, so its default is already autocommit."""

    def __init__(self, driver, url, startup, autocommit):
        import asyncpg

        self._loop = _Loop()
        host, port = _hosts(url)
        settings = {name: str(value) for name, value in startup.items()}
        settings["application_name"] = "locklab"
        try:
            self._conn = self._loop.run(asyncpg.connect(host=host.split(","), port=[int(p) for p in port.split(",")],
                                                        user=url.username, password=url.password,
                                                        database=url.database, server_settings=settings,
                                                        timeout=5))
        except BaseException:
            self._loop.close()
            raise

    def one(self, sql, params):
        query, args = _positional(sql, params)
        return tuple(self._loop.run(self._conn.fetchrow(query, *args)))

    def commit(self):
        pass  # asyncpg opened no transaction

    def drop(self):
        try:
            self._conn.terminate()
        finally:
            self._loop.close()


class _SqlAlchemyAsync(LockSession):
    """SQLAlchemy's AsyncConnection on asyncpg: autobegin like its sync form, or AUTOCOMMIT."""

    def __init__(self, driver, url, startup, autocommit):
        from sqlalchemy.ext.asyncio import create_async_engine

        self._loop = _Loop()
        settings = {name: str(value) for name, value in startup.items()}
        settings["application_name"] = "locklab"
        self._engine = create_async_engine(url.set(drivername="postgresql+asyncpg"), pool_size=1, max_overflow=0,
                                           connect_args={"server_settings": settings, "timeout": 5})
        try:
            conn = self._loop.run(self._engine.connect().start())
        except BaseException:
            self._loop.close()
            raise
        self._conn = self._loop.run(conn.execution_options(isolation_level="AUTOCOMMIT")) if autocommit else conn

    def one(self, sql, params):
        async def run():
            return (await self._conn.execute(_statement(sql), dict(params))).one()

        return tuple(self._loop.run(run()))

    def commit(self):
        self._loop.run(self._conn.commit())

    def drop(self):
        async def drop():
            await self._conn.invalidate()
            await self._conn.close()
            await self._engine.dispose()

        try:
            self._loop.run(drop())
        finally:
            self._loop.close()


_DJANGO_LOCK = threading.Lock()


def _django_ready() -> None:
    """A minimal settings module, built once per process: no project needed."""
    import django
    from django.conf import settings

    with _DJANGO_LOCK:
        if not settings.configured:
            settings.configure(DATABASES={}, INSTALLED_APPS=[], USE_TZ=True)
            django.setup()


class DjangoSession(LockSession):
    """Django's own connection for an alias of the lock's: autocommit, or as inside transaction.atomic().

    Django keeps connections per thread; the alias is the lock's own and shared across threads, so
    the run that took the lock and the one that gives it back may differ, as in a thread pool. For
    the same reason the atomic block is entered and left the way transaction.atomic() does it on the
    connection (set_autocommit(False), then commit and autocommit on), not through the context
    manager, which looks the connection up again in whatever thread leaves it."""

    def __init__(self, driver, url, startup, autocommit):
        from django.db import connections

        _django_ready()
        host, port = _hosts(url)
        self._alias = f"locklab_{secrets.token_hex(6)}"
        with _DJANGO_LOCK:  # configure_settings walks every alias: no other thread may add one meanwhile
            connections.settings[self._alias] = {
                "ENGINE": "django.db.backends.postgresql", "NAME": url.database, "USER": url.username,
                "PASSWORD": url.password, "HOST": host, "PORT": port, "CONN_MAX_AGE": None,
                "OPTIONS": {"options": _options(startup), "connect_timeout": 5, "application_name": "locklab",
                            # the address's own libpq parameters (sslmode, keepalives...), as psycopg takes them
                            **{k: v for k, v in url.query.items() if k != "host"}}}
            connections.configure_settings(connections.settings)
            self._conn = connections[self._alias]
        self._conn.inc_thread_sharing()
        self._set_after_connect: dict[str, str] = {}
        self._connect(startup)
        self._atomic = driver == "django_atomic" and not autocommit
        if self._atomic:
            self._conn.set_autocommit(False)  # what entering transaction.atomic() does to the connection

    def _connect(self, startup) -> None:
        """Connect now; where a pooler refuses the options startup parameter, connect without it and give every
        connection of this alias the settings once it is made (session-wide, as the lab's AUTOCOMMIT sessions
        get them there: lab/servers/pooler_settings.py), through Django's own connection_created signal."""
        from django.db import OperationalError
        from django.db.backends.signals import connection_created

        try:
            self._conn.ensure_connection()
            return
        except OperationalError as exc:
            if REFUSAL not in str(exc) or not startup:
                raise
        self._conn.settings_dict["OPTIONS"].pop("options", None)
        self._set_after_connect = {name: str(value) for name, value in startup.items()}
        connection_created.connect(self._apply_settings, weak=False, dispatch_uid=self._alias)
        self._conn.ensure_connection()

    def _apply_settings(self, sender, connection, **kwargs) -> None:
        if connection.alias != self._alias:
            return
        with connection.cursor() as cursor:
            for name, value in self._set_after_connect.items():
                cursor.execute("select set_config(%s, %s, false)", [name, value])

    def bind(self) -> None:
        """Make this the connection the calling thread's `connections[alias]` gives (Django keeps one per thread):
        a library that looks the alias up itself (django-pglock) then uses this session from any thread, as
        Django's own live-server tests share a connection with their server thread."""
        from django.db import connections

        connections[self._alias] = self._conn

    @property
    def alias(self) -> str:
        """The name Django's `connections` knows this connection by."""
        return self._alias

    def backend_pid(self) -> int:
        """The PostgreSQL pid of its session, as the driver keeps it (no round trip); it connects if it has not."""
        self._conn.ensure_connection()
        return backend_pid_of(self._conn.connection)

    def one(self, sql, params):
        with self._conn.cursor() as cursor:
            cursor.execute(_pyformat(sql), dict(params))
            return tuple(cursor.fetchone())

    def warnings_during(self, call: Callable[[], object]) -> list[str]:
        """The server's notices (WARNING and below) on this session while call ran: what a library that drops a
        statement's answer (pg_advisory_unlock's false) still had said to it, read without a round trip."""
        self._conn.ensure_connection()
        raw, said = self._conn.connection, []
        if hasattr(raw, "add_notice_handler"):  # psycopg 3
            def heard(diag) -> None:
                said.append(str(diag.message_primary))

            raw.add_notice_handler(heard)
            try:
                call()
            finally:
                raw.remove_notice_handler(heard)
            return said
        before = len(raw.notices)  # psycopg2 keeps the last 50
        call()
        return [str(n).strip() for n in raw.notices[before:]]

    def commit(self):
        if self._atomic:  # what leaving the block does: commit, and autocommit again
            self._conn.commit()
            self._conn.set_autocommit(True)
            self._atomic = False

    def drop(self):
        from django.db import connections
        from django.db.backends.signals import connection_created

        try:
            self._conn.close()
        finally:
            connection_created.disconnect(dispatch_uid=self._alias)
            self._conn.dec_thread_sharing()
            with _DJANGO_LOCK:
                connections.settings.pop(self._alias, None)
