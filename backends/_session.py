"""A PostgreSQL session advisory lock held for the whole run on a connection of its own.

The post's methods 1 to 3 differ only in how that connection treats transactions:
a default (autobegin) connection, a commit right after acquiring, or AUTOCOMMIT.
The run's writes go through other pooled sessions, as in the post's job.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from backends._writes import write_transaction
from backends.base import Backend, BackendContext, Point, RebuildResult, no_point
from lab.errors import LockLost
from lab.servers.clients import pg_engine
from lab.servers.pg import holds_advisory_lock

_TRY_LOCK = text("select pg_try_advisory_lock(hashtextextended(:k, 0)), "
                 "hashtextextended(:k, 0), pg_backend_pid()")
_UNLOCK = text("select pg_advisory_unlock(hashtextextended(:k, 0))")


class SessionLockBackend(Backend):
    """Base for the three session-lock methods; subclasses set the two flags below."""

    capabilities = frozenset({"session_lock", "exclusion"})
    autocommit: bool = False
    commit_after_acquire: bool = False

    def __init__(self, ctx: BackendContext, key: str):
        super().__init__(ctx, key)
        # The lock's own session, through a proxy when a fault cuts the lock's connection.
        url = ctx.lock_services.pg_url
        self._lock_engine: Engine = pg_engine(url, ctx.lock_settings, pool_size=1, max_overflow=0)
        self._conn: Connection | None = None
        self._pid: int | None = None
        self._key_int: int | None = None

    @property
    def lock_pid(self) -> int | None:
        return self._pid

    def _connection(self) -> Connection:
        if self._conn is None:
            conn = self._lock_engine.connect()
            if self.autocommit:
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            self._conn = conn
        return self._conn

    def acquire(self) -> bool:
        conn = self._connection()
        got, self._key_int, self._pid = conn.execute(_TRY_LOCK, {"k": self.key}).one()
        if self.commit_after_acquire:
            conn.commit()
        return bool(got)

    def held(self) -> bool:
        if self._pid is None:
            return False
        return holds_advisory_lock(self.ctx.monitor, self._pid, self._key_int)

    def touch(self) -> None:
        self._connection().execute(text("select 1"))

    def release(self) -> None:
        if self._conn is None:
            raise LockLost("release without acquire")
        try:
            released = self._conn.execute(_UNLOCK, {"k": self.key}).scalar()
            if not self.autocommit:
                self._conn.commit()
        except SQLAlchemyError as exc:
            raise LockLost(f"the lock's session is gone, so the lock went with it ({type(exc).__name__})") from exc
        if not released:
            raise LockLost("pg_advisory_unlock returned false: this session did not hold the lock", told="false")

    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        # The writes go through the shared pool, on sessions other than the lock's.
        return write_transaction(self.ctx.writes, self.ctx.table, [company], rows, run_id, point=point)

    def close(self) -> None:
        if self._conn is not None:
            # invalidate(), not close(): close() would return the session, lock and all, to the pool.
            self._conn.invalidate()
            self._conn.close()
            self._conn = None
        self._lock_engine.dispose()
