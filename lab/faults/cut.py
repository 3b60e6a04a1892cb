"""The holder's lock connection blackholed by a loopback proxy (no RST, bytes stop), then restored.

route() starts one proxy per server that holds the lock and gives the holder addresses
through them, with every credential kept. confirm() proves the proxy carried the lock's
connection: bytes relayed before the cut and, on PostgreSQL, the lock's own session
connected from the proxy's port. heal() proves nothing was relayed during the cut.
"""

from __future__ import annotations

from lab.faults.base import Fault, FaultNotConfirmed, Route, Target
from lab.servers.clients import is_sentinel_url
from lab.servers.proxy import BlackholeProxy
from lab.servers import sessions
from lab.servers.services import Services
from lab.servers.stores import SQL_STORES, url_of
from lab.declarations.skips import NotRun


class Cut(Fault):
    name = "cut"
    label = "lock connection cut past the TTL"

    def __init__(self):
        self.proxies: list[BlackholeProxy] = []
        self._bytes_at_cut = 0

    def applies_to(self, backend_cls) -> str | None:
        if not backend_cls.lock_routable:  # a cut would reach it; the lab cannot put its proxy in the way
            return NotRun(f"{backend_cls.name} declares that its lock connection cannot be routed through a proxy")
        return None

    def cannot_run(self, backend_cls, services: Services) -> str | None:
        reason = super().cannot_run(backend_cls, services)
        if reason is None and backend_cls.lock_service == "redis" and is_sentinel_url(services.redis_url):
            return NotRun("its client connects wherever the Sentinels say the primary is: a proxy in front of the "
                          "Sentinels would not carry the lock's connection")
        return reason

    def route(self, services: Services, backend_cls) -> Route:
        service = backend_cls.lock_service
        self.proxies = [BlackholeProxy(host, port).start() for host, port in services.addresses(service)]
        routed = services.routed(service, [p.port for p in self.proxies])
        if service in SQL_STORES and not backend_cls.holds_across_writes():  # the lock is the write's
            return Route(writes_url=url_of(routed, service))
        return Route(lock_services=routed)

    def inject(self, target: Target) -> None:
        for proxy in self.proxies:
            proxy.blackhole()

    def confirm(self, target: Target) -> dict:
        self._bytes_at_cut = sum(p.relayed_bytes() for p in self.proxies)
        connections = [c for p in self.proxies for c in p.open_connections()]
        evidence = {"fault": self.name, "connections": len(connections), "bytes_before": self._bytes_at_cut}
        if not connections or self._bytes_at_cut == 0:
            raise FaultNotConfirmed("the cut never carried the lock's connection: the proxy relayed no bytes")
        pid = target.lock_pid if target.lock_pid is not None else target.write_pid
        if target.backend_cls.lock_service in SQL_STORES and pid is not None:  # the monitor is on that server
            port = sessions.client_port(target.monitor, pid)
            if port not in {c.upstream_port for c in connections}:
                raise FaultNotConfirmed(f"the lock's session (pid {pid}) does not come through the proxy "
                                        f"(client port {port})")
            evidence["session_through_proxy"] = pid
        return evidence

    def heal(self, target: Target) -> dict:
        during = sum(p.relayed_bytes() for p in self.proxies) - self._bytes_at_cut
        for proxy in self.proxies:
            proxy.restore()
        return {"relayed_during": during}

    def close(self) -> None:
        for proxy in self.proxies:
            proxy.stop()
