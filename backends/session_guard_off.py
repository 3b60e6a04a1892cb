"""Method 1 with the guard switched off: the session lock on a default connection that sets
idle_in_transaction_session_timeout = 0 on its own session, or on a role.

The post's first Why-not row: "It works, but it exempts the session from a guard the owner set on
purpose and leaves the transaction open." The setting is made with set_config on the lock's session,
as its first statement, so it outranks whatever the server, database, role or connection string gave
that session; the lock is then taken in the same autobegun transaction, which stays open all run long.
scenarios/whynot/horizon.py measures what that open transaction holds back (backend_xmin, and dead tuples
VACUUM cannot remove).

Option guard_off_on="role" is the row's other form: ALTER ROLE <role> SET idle_in_transaction_session_timeout
= 0 on a login role made for this instance, which the lock's session logs in as. The lab pins the guard in
every session's startup packet, and a startup setting outranks a role's, so this session leaves the guard out
of its startup packet (pinning the rest as usual): the role's 0 then outranks a guard the owner set on the
database or the server, and a guard given at connect time still outranks the role, as on any server. It
creates a role, so it runs only on a PostgreSQL the lab started, on the lab's default driver; the role is
dropped with the session.
"""

from __future__ import annotations

import secrets
from typing import ClassVar, Mapping

from sqlalchemy import text
from sqlalchemy.engine import URL

from backends._session import SessionLockBackend
from lab.declarations.capabilities import Capability
from lab.errors import LabError
from lab.declarations.post_role import PostRole
from lab.servers.clients import known_settings, pg_engine
from lab.servers.postgres.drivers import DEFAULT as DEFAULT_DRIVER
from lab.servers.postgres.drivers import LockSession

GUARD = "idle_in_transaction_session_timeout"
_GUARD_OFF = f"select set_config('{GUARD}', '0', false)"
_GUARD_IN_FORCE = f"select setting, source from pg_settings where name = '{GUARD}'"
GUARD_OFF_ON = ("session", "role")


def guard_left_to_server(url: URL, settings: Mapping[str, object]) -> dict:
    """Startup settings that pin every setting the lab pins, except the guard unless given: the guard then
    comes from the server, the database or the role, as a session that does not set it gets it."""
    pinned = {name: 0 for name in sorted(known_settings(url, {"connect_timeout": 5})) if name != GUARD}
    return {**pinned, **settings}


class _RoleSession(LockSession):
    """The lock's connection as the guard-off role: SQLAlchemy on psycopg2, autobegin, the guard not pinned."""

    def __init__(self, url: URL, settings: Mapping[str, object]):
        self._engine = pg_engine(url, guard_left_to_server(url, settings), pin=False, pool_size=1, max_overflow=0)
        self._conn = self._engine.connect()

    def one(self, sql, params):
        return tuple(self._conn.execute(text(sql), dict(params)).one())

    def commit(self):
        self._conn.commit()

    def drop(self):
        try:
            self._conn.invalidate()
            self._conn.close()
        finally:
            self._engine.dispose()


class SessionLockGuardOff(SessionLockBackend):
    """The idle-in-transaction guard no longer applies to this session; every other way a session ends still does."""

    name = "session_guard_off"
    post_role = PostRole.GUARD_OFF
    summary = ("session advisory lock on a default (autobegin) connection that sets "
               "idle_in_transaction_session_timeout = 0 on its own session (or, with guard_off_on=role, on a role)")
    capabilities = SessionLockBackend.capabilities | {Capability.GUARD_OFF_ON_ROLE}
    guard_off_on: ClassVar[tuple[str, ...]] = GUARD_OFF_ON  # where it can turn the guard off

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self.where = ctx.options.get("guard_off_on", "session")
        if self.where not in GUARD_OFF_ON:
            raise ValueError(f"guard_off_on must be one of {GUARD_OFF_ON}, not {self.where!r}")
        self.guard_role: str | None = None  # the role made for guard_off_on=role, until close()

    def _connection(self) -> LockSession:
        fresh = self._session is None
        if fresh and self.where == "role":
            self._session = self._role_session()
            return self._session
        session = super()._connection()
        if fresh:
            session.one(_GUARD_OFF, {})
        return session

    def _role_session(self) -> LockSession:
        if not self.ctx.services.is_embedded("postgres"):
            raise LabError("guard_off_on=role creates a role: only on a PostgreSQL the lab started")
        if self.driver != DEFAULT_DRIVER:
            raise LabError(f"guard_off_on=role opens its session with {DEFAULT_DRIVER} only")
        name, password = f"locklab_guard_off_{secrets.token_hex(6)}", secrets.token_urlsafe(24)
        with self.ctx.monitor.connect() as conn:  # AUTOCOMMIT, as the lab's own (superuser) role
            conn.execute(text(f"create role {name} login password :p"), {"p": password})
            self.guard_role = name
            conn.execute(text(f"alter role {name} set {GUARD} = 0"))
        url = self.ctx.lock_services.pg().set(username=name, password=password)
        return _RoleSession(url, self.ctx.lock_settings)

    def guard_in_force(self) -> tuple[str, str]:
        """The guard as the lock's own session sees it, and where it came from (pg_settings.source: 'session'
        for set_config, 'user' for a role's setting, 'database', 'client' for a startup setting)."""
        setting, source = self._connection().one(_GUARD_IN_FORCE, {})
        return setting, source

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.guard_role is not None:
                with self.ctx.monitor.connect() as conn:
                    conn.execute(text(f"drop role if exists {self.guard_role}"))
                self.guard_role = None
