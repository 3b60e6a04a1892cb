"""A lease row in PostgreSQL: holder, token from a sequence, expiry on the database clock; fenced writes."""

from __future__ import annotations

import secrets
import threading
from typing import Any

from sqlalchemy import event, exc, text

from backends import _bare
from backends._fence import FENCES_DDL
from backends._lease import LeaseBackend
from backends.base import BareCall
from lab.declarations.capabilities import Capability
from lab.servers.readable import readable
from lab.servers.clients import pg_engine
from lab.workload.table import SCHEMA

LEASES = f"{SCHEMA}.leases"
LEASES_DDL = [f"create sequence if not exists {SCHEMA}.lease_tokens",
              f"create table if not exists {LEASES} (name text primary key, holder text not null, "
              f"token bigint not null, expires_at timestamptz not null)"]

# Take the lease when it is free or expired; every grant draws a new, higher token.
_TAKE = text(f"insert into {LEASES} (name, holder, token, expires_at) "
             f"values (:n, :h, nextval('{SCHEMA}.lease_tokens'), clock_timestamp() + make_interval(secs => :ttl)) "
             f"on conflict (name) do update set holder = excluded.holder, token = excluded.token, "
             f"expires_at = excluded.expires_at where {LEASES}.expires_at < clock_timestamp() returning token")
_RENEW = text(f"update {LEASES} set expires_at = clock_timestamp() + make_interval(secs => :ttl) "
              f"where name = :n and token = :t and expires_at >= clock_timestamp() returning 1")
_OWNED = text(f"select 1 from {LEASES} where name = :n and token = :t and expires_at >= clock_timestamp()")
_RELEASE = text(f"delete from {LEASES} where name = :n and token = :t and expires_at >= clock_timestamp() "
                f"returning 1")


class LeaseRow(LeaseBackend):
    """The 'lease row' of the post's Why-not-just table: an extra write per company and one hot row."""

    name = "lease_row"
    summary = "lease row in PostgreSQL with expiry and a token; PostgreSQL fences every write"
    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.FENCING, Capability.EXCLUSION})
    ddl = [FENCES_DDL, *LEASES_DDL]

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self._holder = secrets.token_hex(8)
        # The lease's own sessions (through a proxy when a fault cuts the lock service).
        url = ctx.lock_services.pg_url
        self._engine = pg_engine(url, ctx.lock_settings, isolation_level="AUTOCOMMIT", pool_size=2,
                                 connect_args={"connect_timeout": max(1, int(self.ttl))})
        event.listen(self._engine, "checkout", _ping_when_readable(self._engine.dialect))
        self._kept = _KeptConnections(self._engine)

    def _one(self, statement, slot: str = "run", **params) -> Any:
        return self._kept.scalar(slot, statement, {"n": self.key, "ttl": self.ttl, **params})

    def _try_acquire(self) -> int | None:
        return self._one(_TAKE, h=self._holder)

    def _renew(self) -> bool:
        return self._one(_RENEW, "renewal", t=self.token) is not None

    def _owned(self) -> bool:
        return self._one(_OWNED, t=self.token) is not None

    def _release(self) -> bool:
        return self._one(_RELEASE, t=self.token) is not None

    def bare_call(self, key: str) -> BareCall | None:
        """Its two statements, take and release, on one AUTOCOMMIT connection: one commit each."""
        conn, close = _bare.connection(self.ctx, "psycopg2", autocommit=True)
        lease = {"n": key, "h": self._holder, "ttl": self.ttl, "t": None}

        def take():
            lease["t"] = conn.execute(_TAKE, lease).scalar()
            return lease["t"] is not None

        return BareCall("SQLAlchemy (psycopg2, AUTOCOMMIT): insert ... on conflict ... returning token; "
                        "delete ... returning 1", take, lambda: conn.execute(_RELEASE, lease).scalar(), close)

    def close(self) -> None:
        super().close()  # the keep-alive thread has stopped using its connection
        self._kept.close()
        self._engine.dispose()


class _KeptConnections:
    """Two connections kept between statements, one for the keep-alive's renewals and one for the rest: a
    pool checkout and check-in around every statement cost about 140 us each, against the bare call's one
    connection. Before each statement a kept connection gets the checkout's test (_closed_by_server);
    one that failed is dropped, and the next statement opens a new one. A statement that
    finds its slot busy (another thread in a statement) takes a pooled connection, as before."""

    def __init__(self, engine):
        self._engine = engine
        self._slots: dict[str, list] = {"run": [None], "renewal": [None]}
        self._locks = {name: threading.Lock() for name in self._slots}

    def scalar(self, slot: str, statement, params: dict) -> Any:  # the statement's one value, as the driver gives it
        lock = self._locks[slot]
        if not lock.acquire(blocking=False):
            with self._engine.connect() as conn:
                return conn.execute(statement, params).scalar()
        try:
            box = self._slots[slot]
            if box[0] is not None and (box[0].invalidated or box[0].closed or not _answers(box[0])):
                _drop(box)
            if box[0] is None:
                box[0] = self._engine.connect()  # the pool's checkout test runs here
            try:
                return box[0].execute(statement, params).scalar()
            except exc.DBAPIError:
                _drop(box)  # whatever went wrong, the next statement starts on a fresh connection
                raise
        finally:
            lock.release()

    def close(self) -> None:
        for name, box in self._slots.items():
            if self._locks[name].acquire(timeout=1.0):  # a statement hung on a cut connection keeps its own
                try:
                    _drop(box)
                finally:
                    self._locks[name].release()


def _drop(box: list) -> None:
    conn, box[0] = box[0], None
    if conn is None:
        return
    try:
        if not conn.closed:
            conn.invalidate()
        conn.close()
    except Exception:  # a connection already gone has nothing left to close
        pass


def _answers(conn) -> bool:
    """The checkout's test (_closed_by_server) for a kept connection, before each of its statements."""
    return _closed_by_server(conn.connection.dbapi_connection, conn.dialect) is None


def _closed_by_server(raw, dialect) -> str | None:
    """Why the server has closed this psycopg2 connection, or None while it answers.

    pool_pre_ping sent a `select 1` before every statement: 2 + 2 round trips per acquire and
    release where 1 + 1 do, for the rare connection a restart or a terminated session left behind.
    Such a connection has the server's goodbye (or end of file) waiting on its socket, while an idle
    AUTOCOMMIT session has nothing to read; so the ping is sent only when something is waiting (TLS
    bookkeeping can be, harmlessly), and only a failed ping says the connection is gone.
    """
    if raw.closed:
        return "the connection is closed"
    if not readable(raw.fileno(), 0):
        return None
    try:
        dialect.do_ping(raw)
        return None
    except Exception as error:
        return f"the server closed this pooled connection ({error})"


def _ping_when_readable(dialect):
    """A pool checkout check that costs a round trip only when the server may have closed the connection
    (_closed_by_server); a connection that failed it makes the pool open a new one."""

    def check(dbapi_connection, record, proxy) -> None:
        reason = _closed_by_server(dbapi_connection, dialect)
        if reason is not None:
            raise exc.DisconnectionError(reason)

    return check
