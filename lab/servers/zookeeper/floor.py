"""ZooKeeper's floor: a read and a write (logged and synced like a lock node's create and delete) on kazoo."""

from __future__ import annotations

from lab.servers.floor_probe import FloorProbe
from lab.servers.services import Services


class ZooKeeperFloor(FloorProbe):
    service = "zookeeper"
    main = "set (kazoo)"

    def open(self, services: Services, key: str, commit_table: str) -> None:
        from kazoo.client import KazooClient  # the libraries extra: only ZooKeeper locks get here

        client = KazooClient(hosts=services.zookeeper())
        client.start()
        self._closers += [client.stop, client.close]
        path = f"/locklab-floor/{key.replace('/', '|')}"
        client.ensure_path(path)
        self.calls["exists (kazoo)"] = lambda: client.exists(path)
        self.calls["set (kazoo)"] = lambda: client.set(path, b"1")
