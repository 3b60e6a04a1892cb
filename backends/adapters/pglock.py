"""django-pglock's advisory lock, as its documentation shows it: pglock.advisory(lock_id, ...) on Django's connection.

Two forms, two rows:
- `pglock_session`: `pglock.advisory(key, timeout=0, using=alias).acquire()` on a Django connection of its
  own in Django's default autocommit mode, held for the run, released with `.release()`; the writes go
  through the lab's sessions, as the post's job's do. A session advisory lock on an autocommit
  connection: the post's method 3, taken by the library.
- `pglock_xact`: `pglock.advisory(key, xact=True, using=alias).acquire()` as the first statement of each
  company's write transaction, waiting for the lock (the library's default; with the lab's option
  lock_timeout_ms, pglock's `timeout=` and `side_effect=pglock.Raise`): the post's method 4, taken by
  the library inside `transaction.atomic()`.

The library keys a string lock id by the first 8 bytes of its SHA-256 (pglock.advisory_id), so held()
reads pg_locks for that key. What the library leaves unsaid, measured: `release()` discards
pg_advisory_unlock's answer, so a release of a lock the session no longer holds returns None like a
successful one (PostgreSQL's WARNING goes to the connection's notices); and acquire() with a timeout
turns any OperationalError into "not acquired" (side_effect=Return), a dead session included. The
adapter asks pg_locks before releasing, so its own release never lies.

xact=True needs the lock in the same transaction as the writes, and the lab's writes are SQLAlchemy's
(one write path, backends/_writes.py, with its named points and its handling of a COMMIT that broke):
SQLAlchemy is handed Django's own DB-API connection (create_engine's `creator`), inside Django's
atomic block, so pglock's statement and the rows go through one session in one transaction.
"""

from __future__ import annotations

import pglock
from django.db import DatabaseError, transaction
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from backends._in_write import LockInWrite
from backends._pooled_writes import WritesOnSharedPool
from backends._writes import claimed_transaction
from backends.base import Backend, BackendContext, BareCall, Point, RebuildResult
from lab.declarations.capabilities import Capability
from lab.errors import LockLost
from lab.servers.clients import session_settings
from lab.servers.postgres.drivers import DjangoSession, open_django
from lab.servers.postgres.sql import holds_advisory_lock


class PglockSession(WritesOnSharedPool, Backend):
    """pglock.advisory(key, timeout=0) on Django's autocommit connection, held across the run's writes."""

    name = "pglock_session"
    summary = "django-pglock advisory(timeout=0) on Django's autocommit connection: a session lock held for the run"
    capabilities = frozenset({Capability.SESSION_LOCK, Capability.EXCLUSION})
    library = "django-pglock"
    packages = ("django", "psycopg")

    def __init__(self, ctx: BackendContext, key: str):
        super().__init__(ctx, key)
        self._session: DjangoSession | None = None  # opened at the first acquire, as the lab's session locks open theirs
        self._pid: int | None = None

    def _connection(self) -> DjangoSession:
        if self._session is None:
            self._session = open_django(self.ctx.lock_services.pg(), self.ctx.lock_settings)
        return self._session

    def _lock(self, session: DjangoSession, key: str) -> pglock.advisory:
        session.bind()  # pglock looks the alias up in the calling thread's connections
        return pglock.advisory(key, timeout=0, using=session.alias)

    @property
    def lock_pid(self) -> int | None:
        return self._pid

    def acquire(self) -> bool:
        session = self._connection()
        got = self._lock(session, self.key).acquire()
        self._pid = session.backend_pid()
        return bool(got)

    def held(self) -> bool:
        if self._pid is None:
            return False
        return holds_advisory_lock(self.ctx.monitor, self._pid, pglock.advisory(self.key).int_lock_id)

    def touch(self) -> None:
        self._connection().one("select 1", {})

    def release(self) -> None:
        """pglock's release(); LockLost when the session no longer held the lock, read from the WARNING PostgreSQL
        sends with pg_advisory_unlock's false (pglock drops the false; the warning costs no round trip)."""
        session = self._session
        if session is None:
            raise LockLost("release without acquire")
        lock = self._lock(session, self.key)
        try:
            if session.backend_pid() != self._pid:
                raise LockLost("the lock's session is gone: Django has opened another one since the lock was taken")
            warned = session.warnings_during(lock.release)
        except LockLost:
            raise
        except Exception as exc:  # Django's error for a dead session
            raise LockLost(f"the lock's session is gone, so the lock went with it ({type(exc).__name__})") from exc
        if any("you don't own a lock" in said for said in warned):
            raise LockLost("pglock's release() returned None for a lock its session no longer held (PostgreSQL: "
                           f"{warned[0]}; pg_advisory_unlock's false is discarded)", told="false")

    def bare_call(self, key: str) -> BareCall | None:
        """pglock.advisory(key, timeout=0).acquire() and .release() on a Django connection of its own."""
        session = open_django(self.ctx.lock_services.pg(), self.ctx.lock_settings)
        lock = self._lock(session, key)
        return BareCall("django-pglock advisory(key, timeout=0).acquire(); .release() on Django's connection",
                        lock.acquire, lock.release, session.drop)

    def close(self) -> None:
        if self._session is not None:
            try:
                self._session.drop()  # closed, so its session lock ends with it
            finally:
                self._session = None


class _DjangoWrites:
    """A SQLAlchemy engine whose one connection is Django's own for an alias, so the lab's write path runs on it.

    Django connects and keeps the connection; SQLAlchemy borrows it (creator) and neither resets nor closes it
    on return (a StaticPool, no reset), so a transaction begun by Django's atomic block is the one the writes
    commit. A connection that broke is Django's to replace: the next borrow asks Django again."""

    def __init__(self, session: DjangoSession):
        from django.db import connections

        self.session = session
        session.bind()
        self.django = connections[session.alias]
        self.engine: Engine = create_engine("postgresql+psycopg://", creator=self._borrow, poolclass=StaticPool,
                                            pool_reset_on_return=None)
        with self.engine.connect():  # SQLAlchemy reads the server once, now, outside any transaction of Django's
            pass

    def _borrow(self):
        if self.django.connection is not None and self.django.connection.closed:
            self.django.close()  # a broken session: Django opens a new one below
        self.django.ensure_connection()
        return self.django.connection

    def close(self) -> None:
        self.engine.dispose()  # closes the borrowed connection with it
        self.session.drop()


class PglockXact(LockInWrite):
    """pglock.advisory(key, xact=True) as the first statement of each company's transaction, in Django's atomic block.

    Options, as the lab's xact has them: isolation (READ COMMITTED by default), lock_timeout_ms with
    lock_timeout_retries (a waiter that times out retries the company), sort_batches for rebuild_batch."""

    name = "pglock_xact"
    summary = "django-pglock advisory(xact=True) inside each company's write transaction (transaction.atomic())"
    capabilities = frozenset({Capability.IN_TRANSACTION, Capability.EXCLUSION, Capability.BATCH_REBUILD})
    library = "django-pglock"
    packages = ("django", "psycopg")

    def __init__(self, ctx: BackendContext, key: str):
        super().__init__(ctx, key)
        self._writes: _DjangoWrites | None = None  # opened at the first write

    def company_key(self, company: int) -> str:
        return f"{self.key}:company:{company}"

    def _django(self) -> _DjangoWrites:
        """Django's connection to where the lab's writes go (a fault's proxy, when it routes them), with their settings."""
        if self._writes is None:
            writes = self.ctx.writes
            self._writes = _DjangoWrites(open_django(writes.url, session_settings(writes)))
        return self._writes

    def _lock(self, alias: str, company: int) -> pglock.advisory:
        timeout_ms = self.lock_timeout_ms
        if timeout_ms is None:
            return pglock.advisory(self.company_key(company), xact=True, using=alias)  # waits, as documented
        return pglock.advisory(self.company_key(company), xact=True, using=alias, timeout=timeout_ms / 1000,
                               side_effect=pglock.Raise)

    def write_attempt(self, companies: list[int], rows: int, run_id: str, point: Point,
                      use_copy: bool) -> RebuildResult:
        django = self._django()
        django.session.bind()  # atomic() and pglock look the alias up in the calling thread's connections
        table = self.ctx.company_table

        def claim(conn: Connection, company: int) -> bool:
            return bool(self._lock(django.session.alias, company).acquire())

        def write(conn: Connection, company: int, n: int, run: str, hook: Point) -> int:
            return table.rebuild(conn, company, n, run, hook, use_copy=use_copy)

        result: RebuildResult | None = None
        try:
            with transaction.atomic(using=django.session.alias, durable=True):
                result = claimed_transaction(django.engine, table, companies, rows, run_id, point=point,
                                             claim=claim, write=write, isolation=self.isolation)
        except DatabaseError as exc:
            if result is None:  # the lock's statement itself: Django's error, not SQLAlchemy's
                return _django_failure(exc)
            # Leaving the atomic block found the session broken: the write's own result already says how it ended.
            django.django.close()
        return result

    def close(self) -> None:
        if self._writes is not None:
            try:
                self._writes.close()
            finally:
                self._writes = None


def _django_failure(exc: DatabaseError) -> RebuildResult:
    """A rebuild whose lock statement raised Django's error (lock_timeout: 55P03), as the lab's writes report one."""
    from backends.base import describe_error

    cause = exc.__cause__
    code = getattr(getattr(cause, "diag", None), "sqlstate", None) or getattr(cause, "sqlstate", None)
    return RebuildResult("failed", error=describe_error(exc), sqlstate=code)

