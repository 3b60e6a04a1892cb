"""A lease row in PostgreSQL: holder, token from a sequence, expiry on the database clock; fenced writes."""

from __future__ import annotations

import secrets
import select

from sqlalchemy import event, exc, text

from backends import _bare
from backends._fence import FENCES_DDL
from backends._lease import LeaseBackend
from backends.base import BareCall
from lab.harness.workload import SCHEMA
from lab.servers.clients import pg_engine

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
    capabilities = frozenset({"lease_expiry", "fencing", "exclusion"})
    ddl = [FENCES_DDL, *LEASES_DDL]

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self._holder = secrets.token_hex(8)
        # The lease's own sessions (through a proxy when a fault cuts the lock service).
        url = ctx.lock_services.pg_url
        self._engine = pg_engine(url, ctx.lock_settings, isolation_level="AUTOCOMMIT", pool_size=2,
                                 connect_args={"connect_timeout": max(1, int(self.ttl))})
        event.listen(self._engine, "checkout", _ping_when_readable(self._engine.dialect))

    def _one(self, statement, **params) -> object:
        with self._engine.connect() as conn:
            return conn.execute(statement, {"n": self.key, "ttl": self.ttl, **params}).scalar()

    def _try_acquire(self) -> int | None:
        return self._one(_TAKE, h=self._holder)

    def _renew(self) -> bool:
        return self._one(_RENEW, t=self.token) is not None

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
        super().close()
        self._engine.dispose()


def _ping_when_readable(dialect):
    """A pool checkout check that costs a round trip only when the server may have closed the connection.

    pool_pre_ping sent a `select 1` before every statement: 2 + 2 round trips per acquire and
    release where 1 + 1 do, for the rare connection a restart or a terminated session left behind.
    Such a connection has the server's goodbye (or end of file) waiting on its socket, while an idle
    AUTOCOMMIT session has nothing to read; so the ping is sent only when something is waiting (TLS
    bookkeeping can be, harmlessly), and a failed ping makes the pool open a new connection.
    """

    def check(dbapi_connection, record, proxy) -> None:
        if dbapi_connection.closed:
            raise exc.DisconnectionError("the connection is closed")
        if select.select([dbapi_connection.fileno()], [], [], 0)[0]:
            try:
                dialect.do_ping(dbapi_connection)
            except Exception as error:
                raise exc.DisconnectionError(f"the server closed this pooled connection ({error})") from error

    return check
