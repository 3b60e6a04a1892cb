"""Each lock service's floor probe, one module per service, registered here by the service it declares.

A new lock service brings its probe as one file in its own package and one entry below; the latency scenario asks
probe_for(service) and never branches on a service's name."""

from __future__ import annotations

from lab.servers.etcd.floor import EtcdFloor
from lab.servers.floor_probe import FloorProbe, timed
from lab.servers.mariadb.floor import MariaDBFloor
from lab.servers.postgres.floor import PostgresFloor
from lab.servers.redis.floor import RedisFloor, RedlockFloor
from lab.servers.zookeeper.floor import ZooKeeperFloor

PROBES: dict[str, type[FloorProbe]] = {probe.service: probe for probe in (
    PostgresFloor, MariaDBFloor, RedisFloor, RedlockFloor, EtcdFloor, ZooKeeperFloor)}


def probe_for(service: str) -> type[FloorProbe]:
    """The floor probe a lock service declares (KeyError naming it when none does)."""
    try:
        return PROBES[service]
    except KeyError:
        raise KeyError(f"no floor probe declares the lock service {service!r} (lab/servers/<service>/floor.py)") from None


__all__ = ["FloorProbe", "PROBES", "probe_for", "timed"]
