"""A PostgreSQL session advisory lock held for the whole run on a connection of its own.

The post's methods 1 to 3 differ only in how that connection treats transactions:
a default (autobegin) connection, a commit right after acquiring, or AUTOCOMMIT.
The run's writes go through other pooled sessions, as in the post's job.
"""

from __future__ import annotations

from backends import _bare
from backends._advisory import TRY_LOCK, UNLOCK, AdvisoryLockHeld
from backends._pooled_writes import WritesOnSharedPool
from backends.base import Backend, BackendContext, BareCall
from lab.declarations.capabilities import Capability
from lab.errors import LockLost
from lab.servers.postgres.drivers import DEFAULT as DEFAULT_DRIVER
from lab.servers.postgres.drivers import DRIVERS, LockSession, open_session

# Drivers with no transaction of their own to commit after acquiring (method 2 has no form there).
_NO_OPEN_TRANSACTION = {"asyncpg": "asyncpg opens no transaction by itself, so there is nothing to commit",
                        "django": "Django's connection is in autocommit mode, so there is nothing to commit"}


class SessionLockBackend(AdvisoryLockHeld, WritesOnSharedPool, Backend):
    """Base for the three session-lock methods; subclasses set the two flags below.

    The lock's connection is made by the trial's driver (option `driver`), in that driver's default
    mode or its autocommit mode: method 1 on asyncpg is not the post's case A, because asyncpg leaves
    no transaction open."""

    capabilities = frozenset({Capability.SESSION_LOCK, Capability.EXCLUSION})
    drivers = tuple(DRIVERS)
    autocommit: bool = False
    commit_after_acquire: bool = False

    def __init__(self, ctx: BackendContext, key: str):
        super().__init__(ctx, key)
        self.driver = ctx.options.get("driver", DEFAULT_DRIVER)
        self._session: LockSession | None = None  # opened at the first acquire, as the post's job does
        self._pid: int | None = None
        self._key_int: int | None = None

    @classmethod
    def driver_skip(cls, driver: str) -> str | None:
        if cls.commit_after_acquire and driver in _NO_OPEN_TRANSACTION:
            return _NO_OPEN_TRANSACTION[driver]
        if cls.autocommit and driver == "django_atomic":
            return "inside transaction.atomic() Django's connection is never in autocommit mode"
        return super().driver_skip(driver)

    def _connection(self) -> LockSession:
        if self._session is None:
            # The lock's own session, through a proxy when a fault cuts the lock's connection.
            self._session = open_session(self.driver, self.ctx.lock_services.pg(), self.ctx.lock_settings,
                                         self.autocommit)
        return self._session

    def acquire(self) -> bool:
        session = self._connection()
        got, self._key_int, self._pid = session.one(TRY_LOCK, {"k": self.key})
        if self.commit_after_acquire:
            session.commit()
        return bool(got)

    def touch(self) -> None:
        self._connection().one("select 1", {})

    def release(self) -> None:
        if self._session is None:
            raise LockLost("release without acquire")
        try:
            released = self._session.one(UNLOCK, {"k": self.key})[0]
            if not self.autocommit:
                self._session.commit()
        except Exception as exc:  # each driver raises its own error for a dead session
            raise LockLost(f"the lock's session is gone, so the lock went with it ({type(exc).__name__})") from exc
        if not released:
            raise LockLost("pg_advisory_unlock returned false: this session did not hold the lock", told="false")

    def bare_call(self, key: str) -> BareCall | None:
        """pg_try_advisory_lock and pg_advisory_unlock on a connection of the same driver and mode, with the
        commits this method sends (after acquiring for method 2, after releasing unless AUTOCOMMIT)."""
        opened = _bare.connection(self.ctx, self.driver, self.autocommit)
        if opened is None:
            return None
        conn, close = opened
        then = _bare.commits(self.commit_after_acquire, not self.autocommit)
        return BareCall(f"SQLAlchemy ({self.driver}): pg_try_advisory_lock{then[0]}; pg_advisory_unlock{then[1]}",
                        _bare.statement(conn, _bare.TRY_LOCK, {"k": key}, self.commit_after_acquire),
                        _bare.statement(conn, _bare.UNLOCK, {"k": key}, not self.autocommit), close)

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.drop()  # dropped, never returned to a pool: a pooled session would keep the lock for its next user
