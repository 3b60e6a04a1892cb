"""How the lab starts a server of one service for one trial alone, and the addresses that reach it.

A fault that acts on a whole lock server (a restart, a SIGSTOP) or on its network (the slow link of a private
namespace) must reach one trial and no other, so the trial gets a server of its own: made here like the run's (the
run's binaries, the run's number of Redlock masters), in a folder the caller owns and removes, inside a network
namespace when the caller names one. One table, read by lab/faults/own_server.py and scenarios/slow_network.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from lab.servers.clients import parse_pg_dsn
from lab.servers.etcd.server import EmbeddedEtcd
from lab.servers.postgres.server import EmbeddedPostgres, template_for
from lab.servers.redis.server import EmbeddedRedis, EmbeddedRedlockMasters
from lab.servers.services import Services
from lab.servers.zookeeper.server import EmbeddedZooKeeper


@dataclass(frozen=True)
class OwnServer:
    """One service's server for one trial: make it (not yet started), then address it."""

    # (folder, the run's services, a network namespace's fd or None) -> the server, not yet started
    make: Callable[[Path, Services, int | None], Any]
    # (services, the started server) -> the same services reaching that server instead
    address: Callable[[Services, Any], Services]


def _postgres(root: Path, run: Services, netns: int | None) -> EmbeddedPostgres:
    """The run's PostgreSQL binaries (already where the server's user reaches them), its data a copy of the run's
    initdb'd template (0.23 CPU-s to start here, against 0.67 with initdb of its own)."""
    bin_dir = run.embedded["postgres"].bin
    template = template_for(bin_dir, run.tmp) if run.tmp is not None else None
    return EmbeddedPostgres(root, bin_dir=bin_dir, netns=netns, name="own-postgres", template=template)


def _redis(root: Path, run: Services, netns: int | None) -> EmbeddedRedis:
    """The run's redis-server binary, whichever it is."""
    server = run.embedded["redis"].server if run.is_embedded("redis") else None
    return EmbeddedRedis(root, server=server, netns=netns)


def _redlock(root: Path, run: Services, netns: int | None) -> EmbeddedRedlockMasters:
    """As many masters as the run's, so the quorum a fault breaks is the one the run's trials meet."""
    count = len(run.embedded["redlock"].masters) if run.is_embedded("redlock") else EmbeddedRedlockMasters.COUNT
    return EmbeddedRedlockMasters(root, count=count, netns=netns)


OWN_SERVERS: dict[str, OwnServer] = {
    "postgres": OwnServer(_postgres, lambda services, pg: replace(services, pg_url=parse_pg_dsn(pg.dsn))),
    "redis": OwnServer(_redis, lambda services, redis: replace(services, redis_url=redis.url)),
    "redlock": OwnServer(_redlock, lambda services, masters: replace(services, redlock_urls=masters.urls)),
    "etcd": OwnServer(lambda root, run, netns: EmbeddedEtcd(root, netns=netns),
                      lambda services, etcd: replace(services, etcd_endpoint=etcd.endpoint)),
    "zookeeper": OwnServer(lambda root, run, netns: EmbeddedZooKeeper(root, netns=netns),
                           lambda services, zk: replace(services, zk_hosts=zk.hosts)),
}
