"""OpenStack tooz's PostgreSQL lock, used as tooz documents it: a coordinator, start(start_heart=True), get_lock.

tooz opens the lock's connection with plain psycopg2.connect (no autocommit) and takes
pg_try_advisory_lock through a cursor, so the session it leaves is what this adapter
measures. The lab sets the scenario's guard on that session and reads pg_locks for it;
it changes nothing in how tooz locks.
"""

from __future__ import annotations

import secrets

from tooz import coordination

from backends._pooled_writes import WritesOnSharedPool
from backends.base import Backend, BareCall
from lab.declarations.capabilities import Capability
from lab.errors import LockLost
from lab.servers.clients import pg_hosts, pin_session
from lab.servers.postgres import sql as pg


def _tooz_url(url) -> str:
    """The URL as tooz reads it. tooz passes only host, port, dbname, user and password to psycopg2, so a
    multi-host URL (a primary and its standby) becomes libpq's comma lists in tooz's host and port
    options; target_session_attrs cannot reach libpq through tooz, so it connects to the first node
    that answers, which after a crash of the primary is the promoted standby."""
    hosts = pg_hosts(url)
    if len(hosts) == 1:
        return url.set(drivername="postgresql").render_as_string(hide_password=False)
    # A host of None (libpq's default) is an empty item of the list, as libpq reads it.
    query = {"host": ",".join(h or "" for h, _ in hosts), "port": ",".join(str(p) for _, p in hosts)}
    return url.set(drivername="postgresql", query=query).render_as_string(hide_password=False)


class ToozPostgresLock(WritesOnSharedPool, Backend):
    name = "tooz_pgsql"
    summary = "OpenStack tooz PostgreSQL lock (coordinator with heartbeat); no fencing"
    capabilities = frozenset({Capability.SESSION_LOCK, Capability.EXCLUSION})
    library = "tooz"

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        url = _tooz_url(ctx.lock_services.pg_url)
        self.coordinator = coordination.get_coordinator(url, secrets.token_hex(8).encode())
        self.coordinator.start(start_heart=True)
        self.lock = self.coordinator.get_lock(key.encode())
        self._pid: int | None = None

    @property
    def lock_pid(self) -> int | None:
        return self._pid

    def acquire(self) -> bool:
        got = self.lock.acquire(blocking=False)
        if got:
            conn = self.lock._conn  # tooz's own lock connection: read, and given the scenario's guard
            self._pid = conn.get_backend_pid()
            with conn.cursor() as cur:  # the scenario's guard, and the server's own guards off: one round trip
                pin_session(cur, self.ctx.lock_settings)
        return bool(got)

    def held(self) -> bool:
        if self._pid is None:
            return False
        key1, key2 = self.lock.key  # tooz locks on two bytes of md5(name): pg_advisory_lock(int, int)
        return pg.holds_advisory_pair(self.ctx.monitor, self._pid, key1, key2)

    def touch(self) -> None:
        with self.lock._conn.cursor() as cur:
            cur.execute("select 1")

    def release(self) -> None:
        try:
            released = self.lock.release()
        except Exception as exc:  # what tooz says when the session is gone
            raise LockLost(f"tooz release failed: {type(exc).__name__}: {exc}") from exc
        if not released:
            raise LockLost("tooz says the lock was not acquired", told="false")

    def bare_call(self, key: str) -> BareCall | None:
        """tooz's own PostgreSQL lock, from a coordinator of its own with its heartbeat: acquire and release."""
        coordinator = coordination.get_coordinator(_tooz_url(self.ctx.lock_services.pg_url),
                                                   secrets.token_hex(8).encode())
        coordinator.start(start_heart=True)
        lock = coordinator.get_lock(key.encode())
        return BareCall("tooz get_lock().acquire(blocking=False); release()", lambda: lock.acquire(blocking=False),
                        lock.release, coordinator.stop)

    def close(self) -> None:
        conn = getattr(self.lock, "_conn", None)
        if conn is not None and not conn.closed:
            conn.close()  # ends the session; tooz's release would also close it
        if self.coordinator.is_started:  # close() may follow abandon() (a kill point); tooz refuses a second stop
            self.coordinator.stop()
