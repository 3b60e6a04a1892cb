"""MariaDB's named lock, GET_LOCK, held for the whole run on a connection of its own: the post's methods 1 to 3 there.

GET_LOCK belongs to its session, as a PostgreSQL session advisory lock does, and ends with it. The three methods
differ only in how that connection treats transactions: PyMySQL's default (autocommit off, SQLAlchemy's
autobegin), a commit right after acquiring, or AUTOCOMMIT. Unlike PostgreSQL, a MariaDB session is "in a
transaction" only once it has touched an InnoDB table (or said BEGIN): the lock's own SELECT GET_LOCK() opens
none, so which idle guard ends the lock depends on what else the lock's connection reads (read_table()).
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from backends import _bare
from backends._mariadb import OnMariaDB
from backends._pooled_writes import WritesOnSharedPool
from backends._unpooled import drop
from backends.base import BareCall
from lab.declarations.capabilities import Capability
from lab.errors import LockLost
from lab.servers import sessions
from lab.servers.mariadb import sql as mariadb_sql

# GET_LOCK with a timeout of 0: try once, as pg_try_advisory_lock does. MariaDB names are 64 characters at most: a
# lab key is longer, so it is hashed (SHA-2, 224 bits: 56 hex characters) on the server, the same for every session.
_TRY_LOCK = text("select get_lock(sha2(:k, 224), 0)")
_RELEASE = text("select release_lock(sha2(:k, 224))")
_HOLDER = text("select is_used_lock(sha2(:k, 224))")


class MariaDBSessionLock(WritesOnSharedPool, OnMariaDB):
    """Base of the three GET_LOCK methods; subclasses set the two flags below."""

    capabilities = frozenset({Capability.SESSION_LOCK, Capability.EXCLUSION})
    autocommit: bool = False
    commit_after_acquire: bool = False

    def __init__(self, ctx, key: str):
        super().__init__(ctx, key)
        self._conn: Connection | None = None  # opened at the first acquire, as the post's job does
        self._id: int | None = None

    @property
    def lock_pid(self) -> int | None:
        """The MariaDB connection id of the lock's session (the processlist's id, KILL's argument)."""
        return self._id

    def _connection(self) -> Connection:
        if self._conn is None:
            # The lock's own session, through a proxy when a fault cuts the lock's connection; its settings (a guard)
            # from the start, in PyMySQL's init_command.
            conn = mariadb_sql.unpooled_engine(self.ctx.lock_services.mariadb(), self.ctx.lock_settings).connect()
            self._conn = conn.execution_options(isolation_level="AUTOCOMMIT") if self.autocommit else conn
        return self._conn

    def acquire(self) -> bool:
        conn = self._connection()
        got = conn.execute(_TRY_LOCK, {"k": self.key}).scalar()
        self._id = sessions.session_id(conn)  # from the handshake: no round trip
        if self.commit_after_acquire:
            conn.commit()
        return got == 1

    def held(self) -> bool:
        """IS_USED_LOCK on the monitor's session: the lock's holder is this lock's connection."""
        if self._id is None:
            return False
        with self.ctx.monitor.connect() as conn:
            return conn.execute(_HOLDER, {"k": self.key}).scalar() == self._id

    def touch(self) -> None:
        """`select 1` on the lock's session: on MariaDB it opens no transaction (no table is read)."""
        self._connection().execute(text("select 1")).all()

    def read_table(self) -> None:
        """One read of the company table on the lock's session, as a job that reads its work list on the lock's
        connection does: with autocommit off, this opens the InnoDB transaction an idle guard waits for."""
        self._connection().execute(text(f"select count(*) from {self.ctx.company_table.name}")).all()

    def release(self) -> None:
        if self._conn is None:
            raise LockLost("release without acquire")
        try:
            released = self._conn.execute(_RELEASE, {"k": self.key}).scalar()
            if not self.autocommit:
                self._conn.commit()
        except Exception as exc:  # PyMySQL's error for a session the server ended
            raise LockLost(f"the lock's session is gone, so the lock went with it ({type(exc).__name__})") from exc
        if released != 1:  # 0: another session holds it; NULL: nobody does
            said = "0 (another session holds it)" if released == 0 else "NULL (no such lock)"
            raise LockLost(f"RELEASE_LOCK returned {said}: this session did not hold the lock", told="false")

    def bare_call(self, key: str) -> BareCall | None:
        """GET_LOCK and RELEASE_LOCK through SQLAlchemy on a connection of the same mode, with the commits this method
        sends (after acquiring for method 2, after releasing unless AUTOCOMMIT)."""
        opened = mariadb_sql.unpooled_engine(self.ctx.lock_services.mariadb(), self.ctx.lock_settings).connect()
        conn = opened.execution_options(isolation_level="AUTOCOMMIT") if self.autocommit else opened
        try_lock, release = _TRY_LOCK, _RELEASE

        def acquire():
            got = conn.execute(try_lock, {"k": key}).scalar()
            if self.commit_after_acquire:
                conn.commit()
            return got == 1

        def give_back():
            released = conn.execute(release, {"k": key}).scalar()
            if not self.autocommit:
                conn.commit()
            return released

        then = _bare.commits(self.commit_after_acquire, not self.autocommit)
        return BareCall(f"SQLAlchemy (PyMySQL): GET_LOCK{then[0]}; RELEASE_LOCK{then[1]}", acquire, give_back,
                        lambda: drop(conn))  # never back to a pool: the named lock would stay with it

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            drop(conn)  # closed, never pooled (NullPool): a pooled session would keep the lock for its next user
