"""The lock's server restarted in place (same port, same data): only servers the lab started.

Confirmed by new server process ids: the old processes are gone, new ones answer.
"""

from __future__ import annotations

from lab.faults.base import Fault, FaultNotConfirmed, Target
from lab.servers.services import Services


class Restart(Fault):
    name = "restart"
    label = "lock server restarted"

    def cannot_run(self, backend_cls, services: Services) -> str | None:
        reason = self.applies_to(backend_cls)
        if reason is not None:
            return reason
        service = backend_cls.lock_service
        if not services.is_embedded(service):
            return f"restart needs a {service} server the lab started; it never restarts yours"
        return None

    def inject(self, target: Target) -> None:
        server = target.services.embedded[target.backend_cls.lock_service]
        target.evidence["pids_before"] = list(server.pids)
        target.services.restart(target.backend_cls.lock_service)

    def confirm(self, target: Target) -> dict:
        server = target.services.embedded[target.backend_cls.lock_service]
        before, after = target.evidence.get("pids_before", []), list(server.pids)
        if not after or set(before) & set(after):
            raise FaultNotConfirmed(f"{target.backend_cls.lock_service} kept server pids {before} -> {after}")
        return {"fault": self.name, "service": target.backend_cls.lock_service, "pids_before": before,
                "pids_after": after}
