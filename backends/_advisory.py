"""A PostgreSQL session advisory lock on the run's key: its two statements, and held() as pg_locks answers it.

The try statement returns the key's number and the session's pid with the grant, so held() can read pg_locks for
that session and key without touching the lock's own connection. Shared by the lock on a session of its own
(backends/_session.py) and the lock on the writes' session (backends/session_on_writes.py).
"""

from __future__ import annotations

from backends.base import BackendContext
from lab.servers.postgres.sql import holds_advisory_lock

TRY_LOCK = "select pg_try_advisory_lock(hashtextextended(:k, 0)), hashtextextended(:k, 0), pg_backend_pid()"
UNLOCK = "select pg_advisory_unlock(hashtextextended(:k, 0))"


class AdvisoryLockHeld:
    """Mixin for a backend whose acquire() sets _key_int and _pid together from TRY_LOCK's answer."""

    ctx: BackendContext
    _pid: int | None = None
    _key_int: int | None = None

    @property
    def lock_pid(self) -> int | None:
        return self._pid

    def held(self) -> bool:
        if self._pid is None or self._key_int is None:  # set together, by acquire
            return False
        return holds_advisory_lock(self.ctx.monitor, self._pid, self._key_int)
