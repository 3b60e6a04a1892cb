"""The lock's server restarted (same address, same data): by the lab, or by the user's own command.

On a server the lab started, it restarts the process and confirms by new server process ids.
On a server it did not start, it runs the command given with `--fault-command restart=CMD`
(a cluster manager's restart, `systemctl restart`, `docker restart`) and confirms by a new
server identity read over the server's own protocol (lab/servers/identity.py). Without a
command such a cell is n/a: the lab never restarts a server on its own initiative.
"""

from __future__ import annotations

import time

from lab.faults.base import Fault, FaultNotConfirmed, Target
from lab.faults.commands import run_fault_command
from lab.servers.abilities import Restartable
from lab.servers.clients import redact_text
from lab.servers.identity import restarted, try_identity
from lab.servers.services import Services

BACK_WITHIN = 60.0  # the server answering again, as a different process


class Restart(Fault):
    name = "restart"
    label = "lock server restarted"
    commandable = True

    def cannot_run(self, backend_cls, services: Services) -> str | None:
        reason = self.applies_to(backend_cls)
        if reason is not None:
            return reason
        service = backend_cls.lock_service
        if isinstance(services.embedded.get(service), Restartable):
            return None
        if not services.is_embedded(service) and self.commandable and self.name in services.fault_commands:
            return None
        unless = f" unless given --fault-command {self.name}=CMD" if self.commandable else ""
        return f"restart needs a {service} server the lab started; it never restarts yours{unless}"

    def inject(self, target: Target) -> None:
        service = target.backend_cls.lock_service
        if target.services.is_embedded(service):
            server = target.services.embedded[service]
            target.evidence["pids_before"] = list(server.pids)
            target.services.restart(service)
            return
        before, why = try_identity(target.services, service)
        if before is None:
            raise FaultNotConfirmed(f"{service} did not answer before the restart command: {why}")
        target.evidence["identity_before"] = before
        target.evidence["command_exit"] = run_fault_command(target.services, self.name, service)

    def confirm(self, target: Target) -> dict:
        service = target.backend_cls.lock_service
        if target.services.is_embedded(service):
            server = target.services.embedded[service]
            before, after = target.evidence.get("pids_before", []), list(server.pids)
            if not after or set(before) & set(after):
                raise FaultNotConfirmed(f"{service} kept server pids {before} -> {after}")
            return {"fault": self.name, "service": service, "pids_before": before, "pids_after": after}
        return self._confirm_external(target, service)

    def _confirm_external(self, target: Target, service: str) -> dict:
        """Wait until the server answers as a new process; every part of it must have restarted."""
        before = target.evidence["identity_before"]
        deadline, after, why = time.monotonic() + BACK_WITHIN, None, None
        while time.monotonic() < deadline:
            after, why = try_identity(target.services, service)
            if after is not None and restarted(before, after, service):
                return {"fault": self.name, "service": service,
                        "command": redact_text(target.services.fault_commands[self.name]),
                        "command_exit": target.evidence["command_exit"], "identity_before": before,
                        "identity_after": after}
            time.sleep(0.2)  # no event says a server is back: ask again
        raise FaultNotConfirmed(f"after the restart command {service} " + (
            f"still answers as the same server ({after})" if after is not None else f"did not answer: {why}")
            + f" within {BACK_WITHIN:.0f} s")
