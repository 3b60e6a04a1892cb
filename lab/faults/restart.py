"""The lock's server restarted (same address, same data): by the lab, or by the user's own command.

On a server the lab started, it restarts the process and confirms by new server process ids.
A lock on Redis, etcd or ZooKeeper, where the lab started the run's, is taken on a server of the trial's own
(lab/faults/own_server.py): a restart then reaches that trial's lock alone, so such trials run side by side
(Restart.own_server), while a restart of the run's PostgreSQL, which the trial's writes share, reaches every
session on it and runs alone. The lock connection, the holder and the contender see the same server as they
would the run's, and the trial's writes stay on the run's PostgreSQL, which no such restart touches.
On a server it did not start, it runs the command given with `--fault-command restart=CMD`
(a cluster manager's restart, `systemctl restart`, `docker restart`) and confirms by a new
server identity read over the server's own protocol (lab/servers/identity.py). Without a
command such a cell is *not run*: the lab never restarts a server on its own initiative.
"""

from __future__ import annotations

import time

from lab.faults.base import Fault, FaultNotConfirmed, Route, Target
from lab.faults.commands import run_fault_command
from lab.faults.own_server import OwnLockServer
from lab.servers.abilities import Restartable
from lab.servers.clients import redact_text
from lab.servers.identity import restarted, try_identity
from lab.servers.services import Services
from lab.declarations.skips import NotRun

BACK_WITHIN = 60.0  # the server answering again, as a different process
class Restart(OwnLockServer, Fault):
    name = "restart"
    label = "lock server restarted"
    commandable = True

    def prepare(self, services: Services, backend_cls) -> None:
        self.start_own(services, backend_cls)

    def route(self, services: Services, backend_cls) -> Route:
        return self.own_route(services, backend_cls)

    def close(self) -> None:
        self.stop_own()

    def _embedded(self, target: Target, service: str):
        """The lab-started server this trial restarts: its own, else the run's; None for one the lab did not start."""
        return self.lab_server(target.services, service)

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
        return NotRun(f"restart needs a {service} server the lab started; it never restarts yours{unless}")

    def inject(self, target: Target) -> None:
        service = target.backend_cls.lock_service
        server = self._embedded(target, service)
        if server is not None:
            target.evidence["pids_before"] = list(server.pids)
            server.restart()
            return
        before, why = try_identity(target.services, service)
        if before is None:
            raise FaultNotConfirmed(f"{service} did not answer before the restart command: {why}")
        target.evidence["identity_before"] = before
        target.evidence["command_exit"] = run_fault_command(target.services, self.name, service)

    def confirm(self, target: Target) -> dict:
        service = target.backend_cls.lock_service
        server = self._embedded(target, service)
        if server is not None:
            before, after = target.evidence.get("pids_before", []), list(server.pids)
            if not after or set(before) & set(after):
                raise FaultNotConfirmed(f"{service} kept server pids {before} -> {after}")
            return {"fault": self.name, "service": service, "pids_before": before, "pids_after": after,
                    "server": "the trial's own" if self._own is not None else "the run's"}
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
