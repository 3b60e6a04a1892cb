"""ZooKeeper as a lock service: LAB_ZK_HOSTS (kazoo's connect string), the lab's own server from Debian's jars."""

from __future__ import annotations

from pathlib import Path

from lab.servers.service_kind import ServiceKind
from lab.servers.zookeeper import server


class ZooKeeperService(ServiceKind[str]):
    name, env_var, field, os_package = "zookeeper", "LAB_ZK_HOSTS", "zk_hosts", "zookeeper"
    flag = "zk_hosts"

    def missing(self) -> str | None:
        return server.missing()

    def own_server(self, tmp: Path) -> server.EmbeddedZooKeeper:
        return server.EmbeddedZooKeeper(tmp)

    def own_address(self, own: server.EmbeddedZooKeeper) -> str:
        return own.hosts

    def parse(self, text: str) -> str:
        return text

    def shown(self, address: str) -> str:
        return address

    def hosts(self, address: str) -> list[tuple[str | None, int]]:
        return list(server.parse_hosts(address))

    def routed(self, address: str, ports: list[int]) -> str:
        """Every server of the connect string through its proxy, the chroot kept."""
        return ",".join(f"127.0.0.1:{p}" for p in ports) + server.chroot(address)

    def version(self, address: str, timeout: float) -> str:
        """Every server of the connect string must answer."""
        return ", ".join(sorted({server.version(h, p) for h, p in server.parse_hosts(address)}))
