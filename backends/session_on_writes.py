"""The session lock taken on the same connection that does the writes, committing between companies.

The post's last Why-not row: "A lock on the writes' connection costs parallelism." A session advisory
lock survives commits, so the run takes it once and rebuilds every company in its own transaction on
that same session. The lock and the writes now end together: a run whose session ended has lost its
lock and its connection for writing at once, and this backend never reconnects to write on. What it
costs: every write of the run goes through one session, so a run's workers queue for it
(scenarios/whynot/throughput.py measures companies per second with 1, 2 and 4 workers against xact).

Every use of the connection ends in a commit (acquire, each rebuild, touch), so between companies it
is idle, never idle in a transaction.
"""

from __future__ import annotations

import threading

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from backends import _bare
from backends._advisory import TRY_LOCK, UNLOCK, AdvisoryLockHeld
from backends._unpooled import drop
from backends._writes import CommitWindow
from backends.base import Backend, BackendContext, BareCall, Point, RebuildResult, no_point
from lab.declarations.capabilities import Capability
from lab.errors import LockLost
from lab.declarations.post_role import PostRole
from lab.servers.clients import pg_engine

_TRY_LOCK = text(TRY_LOCK)
_UNLOCK = text(UNLOCK)


class SessionLockOnWrites(AdvisoryLockHeld, Backend):
    """One session for the lock and every write of the run, used by one thread at a time."""

    name = "session_on_writes"
    post_role = PostRole.ON_WRITES
    summary = ("session advisory lock taken on the connection that does the writes, a commit after each "
               "company: lock and writes end together")
    capabilities = frozenset({Capability.SESSION_LOCK, Capability.EXCLUSION})

    def __init__(self, ctx: BackendContext, key: str):
        super().__init__(ctx, key)
        self._engine = None
        self._conn = None
        self._pid: int | None = None
        self._key_int: int | None = None
        self._use = threading.Lock()  # a Connection is one session: the run's workers take turns on it

    def _connection(self):
        if self._conn is None:
            # Opened to the lock's address (a cut's proxy carries it), with the lock's session settings.
            self._engine = pg_engine(self.ctx.lock_services.pg_url, self.ctx.lock_settings, pool_size=1,
                                     max_overflow=0)
            self._conn = self._engine.connect()
        return self._conn

    def acquire(self) -> bool:
        with self._use:
            conn = self._connection()
            got, self._key_int, self._pid = conn.execute(_TRY_LOCK, {"k": self.key}).one()
            conn.commit()
        return bool(got)

    def bare_call(self, key: str) -> BareCall | None:
        """pg_try_advisory_lock and pg_advisory_unlock on a default (autobegin) connection, a COMMIT after each."""
        conn, close = _bare.connection(self.ctx, "psycopg2", autocommit=False)
        return BareCall("SQLAlchemy (psycopg2): pg_try_advisory_lock + COMMIT; pg_advisory_unlock + COMMIT",
                        _bare.statement(conn, _bare.TRY_LOCK, {"k": key}, True),
                        _bare.statement(conn, _bare.UNLOCK, {"k": key}, True), close)

    def touch(self) -> None:
        with self._use:
            conn = self._connection()
            if conn.invalidated:
                raise LockLost("the lock's session is gone")
            conn.execute(text("select 1"))
            conn.commit()

    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        """The company's own transaction, on the lock's session; a dead session fails it (no reconnect)."""
        deleted, window = None, CommitWindow()
        with self._use:
            conn = self._conn
            if conn is None or conn.invalidated:  # SQLAlchemy would reconnect: a new session, without the lock
                return RebuildResult("failed", error="LockLost: the lock's session is gone; no write without it")
            try:
                with conn.begin():
                    point("begin", conn)
                    deleted = self.ctx.company_table.rebuild(conn, company, rows, run_id, point)
                    window.sending()  # leaving the block sends COMMIT
                window.heard()
                point("after_commit", None)
                return RebuildResult("committed", deleted=deleted)
            except SQLAlchemyError as exc:
                return window.failure(exc, self.ctx.writes, self.ctx.company_table, [company], run_id, deleted=deleted)

    def release(self) -> None:
        if self._conn is None:
            raise LockLost("release without acquire")
        with self._use:
            if self._conn.invalidated:
                raise LockLost("the lock's session is gone, so the lock went with it")
            try:
                released = self._conn.execute(_UNLOCK, {"k": self.key}).scalar()
                self._conn.commit()
            except SQLAlchemyError as exc:
                raise LockLost(f"the lock's session is gone, so the lock went with it ({type(exc).__name__})") from exc
        if not released:
            raise LockLost("pg_advisory_unlock returned false: this session did not hold the lock", told="false")

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            drop(conn, self._engine)  # dropped, never returned to a pool: a pooled session would keep the lock
