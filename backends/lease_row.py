"""A lease row in PostgreSQL: holder, token from a sequence, expiry on the database clock; fenced writes."""

from __future__ import annotations

import secrets

from sqlalchemy import text

from backends._fence import FENCES_DDL
from backends._lease import LeaseBackend
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
                                 pool_pre_ping=True, connect_args={"connect_timeout": max(1, int(self.ttl))})

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

    def close(self) -> None:
        super().close()
        self._engine.dispose()
