"""ZooKeeper as a lock service: LAB_ZK_HOSTS (kazoo's connect string), the lab's own server from Debian's jars."""

from __future__ import annotations

from lab.servers.service_kind import ServiceKind
from lab.declarations.where import Service
from lab.servers.zookeeper import server


class ZooKeeperService(ServiceKind[str]):
    """kazoo's connect string (host:port[,host:port...][/chroot]), the lab's own where it is installed."""

    name = Service.ZOOKEEPER
    env_var, flag, field = "LAB_ZK_HOSTS", "zk_hosts", "zk_hosts"
    server_class, address_attribute = server.EmbeddedZooKeeper, "hosts"
    os_package = "zookeeper"

    def missing(self) -> str | None:
        return server.missing()

    def hosts(self, address: str) -> list[tuple[str | None, int]]:
        return list(server.parse_hosts(address))

    def routed(self, address: str, ports: list[int]) -> str:
        """Every server of the connect string through its proxy, the chroot kept."""
        return ",".join(f"127.0.0.1:{p}" for p in ports) + server.chroot(address)

    def version(self, address: str, timeout: float) -> str:
        """Every server of the connect string must answer."""
        return ", ".join(sorted({server.version(h, p) for h, p in server.parse_hosts(address)}))
