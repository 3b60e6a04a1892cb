"""How many more PostgreSQL sessions the server gives the lab's role, and how many the lab really used.

A server the lab did not start may allow 100 connections, keep some for superusers
and cap the role or the database. A scenario that opens more sessions than that does
not measure a lock: its trials error with "remaining connection slots are reserved".
So the runner asks first (Capacity) and watches while it runs (SessionSampler).
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

from sqlalchemy import text
from sqlalchemy.engine import URL, Connection

from lab.servers.clients import pg_engine

_CAPACITY = text("""
select current_setting('max_connections')::int as max_connections,
       current_setting('superuser_reserved_connections')::int as superuser_reserved,
       coalesce(current_setting('reserved_connections', true)::int, 0) as reserved_connections,
       r.rolsuper as superuser,
       coalesce((select pg_has_role(current_user, oid, 'member') from pg_roles
                 where rolname = 'pg_use_reserved_connections'), false) as may_use_reserved,
       (select count(*) from pg_stat_activity where backend_type = 'client backend') as in_use,
       r.rolconnlimit as role_limit,
       (select count(*) from pg_stat_activity where backend_type = 'client backend'
          and usename = current_user) as role_in_use,
       d.datconnlimit as database_limit,
       (select count(*) from pg_stat_activity where backend_type = 'client backend'
          and datname = current_database()) as database_in_use
from pg_roles r, pg_database d
where r.rolname = current_user and d.datname = current_database()
""")

_IN_USE = text("select coalesce(nullif(application_name, ''), '(none)') as app, count(*) as n from pg_stat_activity "
               "where backend_type = 'client backend' group by 1")


@dataclass(frozen=True)
class Capacity:
    """The server's connection limits as they apply to the lab's role and database, read at one moment."""

    max_connections: int
    reserved: int  # slots the lab's role may not use (superuser_reserved, reserved_connections)
    in_use: int  # client sessions open on the whole server, the asking one included
    role_left: int | None  # what the role's CONNECTION LIMIT leaves (None: no limit)
    database_left: int | None  # likewise for the database

    @property
    def available(self) -> int:
        """Sessions the lab can still open before the server refuses one (the asking session is closed
        right after, so it counts as free)."""
        limits = [self.max_connections - self.reserved - self.in_use + 1]
        limits += [left + 1 for left in (self.role_left, self.database_left) if left is not None]
        return max(0, min(limits))

    def describe(self) -> str:
        parts = [f"max_connections {self.max_connections}", f"{self.reserved} reserved for other roles",
                 f"{self.in_use - 1} in use"]
        if self.role_left is not None:
            parts.append(f"the role's CONNECTION LIMIT leaves {self.role_left + 1}")
        if self.database_left is not None:
            parts.append(f"the database's CONNECTION LIMIT leaves {self.database_left + 1}")
        return ", ".join(parts)

    def as_dict(self) -> dict:
        return {**asdict(self), "available": self.available}


def read_capacity(url: URL) -> Capacity:
    """Ask the server once; the session asking is counted in use and given back."""
    engine = pg_engine(url, poolclass=None, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            return capacity_on(conn)
    finally:
        engine.dispose()


def capacity_on(conn: Connection) -> Capacity:
    """The limits as they apply to conn's role and database; conn's own session is counted in use."""
    row = conn.execute(_CAPACITY).mappings().one()
    reserved = 0 if row["superuser"] else row["superuser_reserved"] + (
        0 if row["may_use_reserved"] else row["reserved_connections"])
    role_left = None if row["role_limit"] < 0 else row["role_limit"] - row["role_in_use"]
    database_left = None if row["database_limit"] < 0 else row["database_limit"] - row["database_in_use"]
    return Capacity(row["max_connections"], reserved, row["in_use"], role_left, database_left)


class SessionSampler:
    """Counts the server's client sessions every `every` seconds on one session of its own; keeps the peak.

    The peak is evidence for the capacity plan: a run records what it planned and what it used.
    """

    def __init__(self, url: URL, every: float = 0.25):
        self._engine = pg_engine(url, pool_size=1, max_overflow=0, pool_pre_ping=True,
                                 isolation_level="AUTOCOMMIT",
                                 connect_args={"application_name": "locklab-sampler"})
        self._every = every
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._peak = 0
        self._peak_by_app: dict[str, int] = {}
        self._thread = threading.Thread(target=self._loop, name="session-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                with self._engine.connect() as conn:
                    by_app = {row.app: row.n for row in conn.execute(_IN_USE)}
                with self._lock:
                    if sum(by_app.values()) > self._peak:
                        self._peak, self._peak_by_app = sum(by_app.values()), by_app
            except Exception:  # a restart fault ends this session too; the next sample reconnects
                pass
            self._stop.wait(self._every)

    def take_peak(self) -> tuple[int, dict[str, int]]:
        """The most sessions seen since the last call (this sampler's own included) and, at that moment,
        how many each application_name had; then start afresh."""
        with self._lock:
            peak, by_app = self._peak, self._peak_by_app
            self._peak, self._peak_by_app = 0, {}
        return peak, by_app

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._engine.dispose()
