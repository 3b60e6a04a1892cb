"""Method 1 with the guard switched off: the session lock on a default connection that sets
idle_in_transaction_session_timeout = 0 on its own session.

The post's first Why-not row: "It works, but it exempts the session from a guard the owner set on
purpose and leaves the transaction open." The setting is made with set_config on the lock's session,
as its first statement, so it outranks whatever the server, database, role or connection string gave
that session; the lock is then taken in the same autobegun transaction, which stays open all run long.
scenarios/whynot.py measures what that open transaction holds back (backend_xmin, and dead tuples
VACUUM cannot remove).
"""

from backends._session import SessionLockBackend
from lab.servers.drivers import LockSession

_GUARD_OFF = "select set_config('idle_in_transaction_session_timeout', '0', false)"


class SessionLockGuardOff(SessionLockBackend):
    """The idle-in-transaction guard no longer applies to this session; every other way a session ends still does."""

    name = "session_guard_off"
    summary = ("session advisory lock on a default (autobegin) connection that sets "
               "idle_in_transaction_session_timeout = 0 on its own session")

    def _connection(self) -> LockSession:
        fresh = self._session is None
        session = super()._connection()
        if fresh:
            session.one(_GUARD_OFF, {})
        return session
