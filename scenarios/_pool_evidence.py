"""What a pooler did with a trial's sessions, as PostgreSQL shows it: the pool's server sessions and their
advisory locks (pg_stat_activity and pg_locks on a direct monitor session), where clients' transactions ran,
and what a client that never took a lock can free.
"""

from __future__ import annotations

from collections import defaultdict

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


class PoolView:
    """The pooler's server sessions, read from the server itself (the pooler's own view is not evidence)."""

    def __init__(self, monitor: Engine, bouncer: PgBouncer):
        self.monitor, self.bouncer = monitor, bouncer

    def sessions(self) -> list[dict]:
        """Each server session of the pool: pid, state, the application that used it last, its advisory locks."""
        with self.monitor.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(_SESSIONS, {"ports": sorted(self.bouncer.server_ports())})]

    def advisory_locks(self) -> dict[int, int]:
        return {s["pid"]: s["advisory_locks"] for s in self.sessions()}

    def clients(self) -> int:
        """Client connections the pooler has open right now."""
        import psutil

        return sum(1 for c in psutil.Process(self.bouncer.pids[0]).net_connections(kind="tcp")
                   if c.laddr.port == self.bouncer.port and c.status == psutil.CONN_ESTABLISHED)


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
        after = pool.advisory_locks()
    finally:
        engine.dispose()
    return {"pid": pid, "locks_before": before.get(pid, 0), "locks_after": after.get(pid, 0)}
