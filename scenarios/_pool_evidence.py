"""What a pooler did with a trial's sessions, as PostgreSQL shows it: the pool's server sessions and their
advisory locks (pg_stat_activity and pg_locks on a direct monitor session), where clients' transactions ran,
and what a client that never took a lock can free. The pooler is the lab's own PgBouncer (OwnPooler: its process
lists its connections) or the user's (GivenPooler, --pg-pooler-dsn: the sessions its clients were given).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol

from sqlalchemy import text
from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import NullPool

from lab.servers.clients import pg_engine
from lab.servers.pgbouncer.server import PgBouncer

_SESSIONS = text(
    "select a.pid, a.state, a.application_name, "
    "(select count(*) from pg_locks l where l.pid = a.pid and l.locktype = 'advisory' and l.granted)::int "
    "as advisory_locks from pg_stat_activity a where a.client_port = any(:ports) order by a.pid")
# Run by a client through the pooler: the server session its transaction got, and the advisory locks on it.
_WHERE_AM_I = text("select pg_backend_pid(), (select count(*) from pg_locks where pid = pg_backend_pid() "
                   "and locktype = 'advisory' and granted)::int")
_UNLOCK_ALL = text("select pg_advisory_unlock_all(), pg_backend_pid()")
_PORTS = text("select client_port from pg_stat_activity where pid = any(:pids)")


class TrialPooler(Protocol):
    """A pooler a trial's clients go through, as the server and the lab can see it."""

    def server_ports(self) -> set[int]:
        """Client ports of its server sessions, as pg_stat_activity names them."""

    def clients(self) -> int | None:
        """Its client connections right now (None: it does not say)."""

    def saw(self, *pids: int | None) -> None:
        """Server sessions the trial's clients were given through it."""


class OwnPooler:
    """The lab's own PgBouncer: its process shows its connections, to the server and from clients."""

    def __init__(self, bouncer: PgBouncer):
        self.bouncer = bouncer

    def server_ports(self) -> set[int]:
        return self.bouncer.server_ports()

    def clients(self) -> int | None:
        import psutil

        return sum(1 for c in psutil.Process(self.bouncer.pids[0]).net_connections(kind="tcp")
                   if c.laddr.port == self.bouncer.port and c.status == psutil.CONN_ESTABLISHED)

    def saw(self, *pids: int | None) -> None:
        return None  # its process lists every server session already


class GivenPooler:
    """A pooler the lab was given (--pg-pooler-dsn), on a host it may not see: its server sessions are those the
    trial's clients were given through it (pg_backend_pid() through the pooler), read from the server on the
    database's own address; how many clients it has is not for the lab to know."""

    def __init__(self, monitor: Engine):
        self.monitor, self.pids = monitor, set[int]()

    def server_ports(self) -> set[int]:
        if not self.pids:
            return set()
        with self.monitor.connect() as conn:
            return {port for port in conn.execute(_PORTS, {"pids": sorted(self.pids)}).scalars() if port is not None}

    def clients(self) -> int | None:
        return None

    def saw(self, *pids: int | None) -> None:
        self.pids.update(pid for pid in pids if pid is not None)


class PoolView:
    """The pooler's server sessions, read from the server itself (the pooler's own view is not evidence)."""

    def __init__(self, monitor: Engine, pooler: TrialPooler):
        self.monitor, self.pooler = monitor, pooler

    def sessions(self) -> list[dict]:
        """Each server session of the pool: pid, state, the application that used it last, its advisory locks."""
        with self.monitor.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(_SESSIONS, {"ports": sorted(self.pooler.server_ports())})]

    def advisory_locks(self) -> dict[int, int]:
        return {s["pid"]: s["advisory_locks"] for s in self.sessions()}

    def clients(self) -> int | None:
        """Client connections the pooler has open right now (None: it does not say)."""
        return self.pooler.clients()


class Probes:
    """Clients connected through the pooler at once, each reporting the server session its transactions ran on."""

    def __init__(self, url: URL, clients: int):
        self.engine = pg_engine(url, pool_size=clients, max_overflow=0,
                                connect_args={"application_name": "locklab-probe"})
        self.connections = [self.engine.connect() for _ in range(clients)]

    def run(self, rounds: int) -> list[dict]:
        """Every client runs one short transaction per round: on which server session, holding how many advisory locks."""
        seen = []
        for round_ in range(rounds):
            for client, conn in enumerate(self.connections):
                pid, locks = conn.execute(_WHERE_AM_I).one()
                conn.commit()
                seen.append({"client": client, "round": round_, "pid": pid, "advisory_locks": locks})
        return seen

    def close(self) -> None:
        for conn in self.connections:
            conn.close()
        self.engine.dispose()


def sessions_moved(probes: list[dict]) -> bool:
    """Whether transactions moved between server sessions: one session served two clients connected at once,
    or one client's transactions ran on two sessions. A session pooler never does either."""
    clients_of, sessions_of = defaultdict(set), defaultdict(set)
    for probe in probes:
        clients_of[probe["pid"]].add(probe["client"])
        sessions_of[probe["client"]].add(probe["pid"])
    return any(len(c) > 1 for c in clients_of.values()) or any(len(s) > 1 for s in sessions_of.values())


def bystander_unlock_all(url: URL, pool: PoolView) -> dict:
    """A client that never took a lock ends its work with pg_advisory_unlock_all(), as cleanup code does (and
    PgBouncer's own DISCARD ALL when a client leaves a session pool): which session it ran on, what it freed."""
    engine = pg_engine(url, poolclass=NullPool, connect_args={"application_name": "locklab-bystander"})
    try:
        before = pool.advisory_locks()
        with engine.connect() as conn:
            pid = conn.execute(_UNLOCK_ALL).one()[1]
            conn.commit()
        pool.pooler.saw(pid)
        after = pool.advisory_locks()
    finally:
        engine.dispose()
    return {"pid": pid, "locks_before": before.get(pid, 0), "locks_after": after.get(pid, 0)}
