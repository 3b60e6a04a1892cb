"""A lock server of the trial's own, for a fault that stops or restarts the server its lock lives on.

Such a fault on the run's Redis, etcd, ZooKeeper or Redlock masters would reach every other trial using them at
that moment, the subjects of a shared fault event in another lane included (a Patroni split brain's Redis-lock
subjects timed out while server_pause stopped the run's Redis). Where the lab started the run's server, the trial
takes its lock on a server it starts for itself instead (prepare(), in the run's temp dir; close() stops it), so
the fault reaches that trial's lock alone; the trial's writes stay on the run's PostgreSQL, which such a fault
never touches. A lock whose writes share its server (PostgreSQL, MariaDB) gets a whole store of its own instead
(scenarios/_own_store.py).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from lab.faults.base import Route
from lab.servers.own import OWN_SERVERS
from lab.servers.services import Services
from lab.declarations.where import DATABASES


# The lock services whose server a trial can start for itself: holding nothing the writes need (PostgreSQL holds
# them, and gets a whole store of its own instead: scenarios/_own_store.py).
OWN_SERVER_SERVICES = tuple(service for service in OWN_SERVERS if service not in DATABASES)


class OwnLockServer:
    """The part of a fault that gives each trial a lock server of its own (prepare, route, close)."""

    own_services: tuple[str, ...] = OWN_SERVER_SERVICES

    def __init__(self) -> None:
        self._own: Any = None  # the server OWN_SERVERS made for this trial
        self._root: Path | None = None

    @classmethod
    def own_server(cls, backend_cls, services: Services) -> bool:
        """Whether a trial of this backend acts on a server of its own rather than one the run's trials share: a
        lock on one of own_services where the lab started the run's (it never stands in for a server it was given)."""
        service = backend_cls.lock_service
        return service in cls.own_services and services.is_embedded(service) and services.tmp is not None

    def start_own(self, services: Services, backend_cls) -> None:
        """Start the trial's own server of the lock's service, when own_server()."""
        if not self.own_server(backend_cls, services):
            return
        service = backend_cls.lock_service
        self._root = Path(tempfile.mkdtemp(prefix=f"own-{service}-", dir=services.tmp))
        self._own = OWN_SERVERS[service].make(self._root, services, None)
        self._own.start()

    def own_route(self, services: Services, backend_cls) -> Route:
        """The addresses of the trial's own server, for the holder and the contender alike; the servers' own
        without one."""
        if self._own is None:
            return Route()
        service = backend_cls.lock_service
        routed = OWN_SERVERS[service].address(services, self._own)
        return Route(lock_services=replace(routed, embedded={service: self._own}, tmp=None), own_servers=True)

    def stop_own(self) -> None:
        if self._own is not None:
            self._own.stop()
            self._own = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def lab_server(self, services: Services, service: str):
        """The lab-started server this trial acts on: its own, else the run's; None for one the lab did not start."""
        if self._own is not None:
            return self._own
        return services.embedded[service] if services.is_embedded(service) else None
