"""The lock's server restarted (same address, same data): by the lab, or by the user's own command.

On a server the lab started, it restarts the process and confirms by new server process ids.
A lock on Redis or etcd, where the lab started the run's, is taken on a server of the trial's own
(started by prepare(), in the run's temp dir, stopped by close()): a restart then reaches that
trial's lock alone, so such trials run side by side (Restart.own_server), while a restart of the run's
PostgreSQL, which the trial's writes share, reaches every session on it and runs alone. Redis and etcd
start in a fraction of a second; the lock connection, the holder and the contender see the same server
as they would the run's, and the trial's writes stay on the run's PostgreSQL, which no Redis or etcd
restart touches.
On a server it did not start, it runs the command given with `--fault-command restart=CMD`
(a cluster manager's restart, `systemctl restart`, `docker restart`) and confirms by a new
server identity read over the server's own protocol (lab/servers/identity.py). Without a
command such a cell is n/a: the lab never restarts a server on its own initiative.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from lab.faults.base import Fault, FaultNotConfirmed, Route, Target
from lab.faults.commands import run_fault_command
from lab.servers.abilities import Restartable
from lab.servers.clients import redact_text
from lab.servers.embedded import EmbeddedEtcd, EmbeddedRedis
from lab.servers.identity import restarted, try_identity
from lab.servers.services import Services

BACK_WITHIN = 60.0  # the server answering again, as a different process
# The lock services whose server a trial starts for itself when the lab started the run's: one process each, up
# in well under a second, holding nothing the trial's writes need.
OWN_SERVER_SERVICES = ("redis", "etcd")


class Restart(Fault):
    name = "restart"
    label = "lock server restarted"
    commandable = True

    def __init__(self):
        self._own = None  # the lock's server of this trial's own, when own_server() (prepare() starts it)
        self._root: Path | None = None

    @staticmethod
    def own_server(backend_cls, services: Services) -> bool:
        """Whether a trial of this backend restarts a server of its own rather than one the run's trials share:
        a lock on Redis or etcd where the lab started the run's (it never stands in for a server it was given)."""
        service = backend_cls.lock_service
        return service in OWN_SERVER_SERVICES and services.is_embedded(service) and services.tmp is not None

    def prepare(self, services: Services, backend_cls) -> None:
        if not self.own_server(backend_cls, services):
            return
        self._root = Path(tempfile.mkdtemp(prefix="restart-", dir=services.tmp))
        if backend_cls.lock_service == "redis":  # the run's redis-server binary, whichever it is
            self._own = EmbeddedRedis(self._root, server=services.embedded["redis"].server)
        else:
            self._own = EmbeddedEtcd(self._root)
        self._own.start()

    def route(self, services: Services, backend_cls) -> Route:
        if self._own is None:
            return Route()
        service = backend_cls.lock_service
        address = {"redis_url": self._own.url} if service == "redis" else {"etcd_endpoint": self._own.endpoint}
        return Route(lock_services=replace(services, **address, embedded={service: self._own}, tmp=None),
                     own_servers=True)

    def close(self) -> None:
        if self._own is not None:
            self._own.stop()
            self._own = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def _embedded(self, target: Target, service: str):
        """The lab-started server this trial restarts: its own, else the run's; None for one the lab did not start."""
        if self._own is not None:
            return self._own
        return target.services.embedded[service] if target.services.is_embedded(service) else None

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
