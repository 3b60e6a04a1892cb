"""etcd's floor: a range and a put of one key, on the v3 client its locks use."""

from __future__ import annotations

from lab.servers.clients import etcd_client
from lab.servers.floor_probe import FloorProbe
from lab.servers.services import Services


class EtcdFloor(FloorProbe):
    service = "etcd"
    main = "put"

    def open(self, services: Services, key: str, commit_table: str) -> None:
        client = etcd_client(services.etcd())
        self._closers.append(client.close)
        path = f"locklab/{key}"
        client.put(path, "0")
        self.calls["range"] = lambda: client.get(path)
        self.calls["put"] = lambda: client.put(path, "1")
