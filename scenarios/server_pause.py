"""The lock's server stopped with SIGSTOP for longer than the TTL, then continued: a server, not a holder, paused.

The mirror of `pause`: here the holder runs on and the server that keeps the lease stands still, as
a Redis, etcd or ZooKeeper host does in a long GC, a VM migration or a frozen container. A lease's deadline is
kept by the server's clock, which goes on while the process is stopped, so on SIGCONT the lease has
lapsed; whether the holder's renewal or a contender's request reaches the server first decides who
holds it then, and the holder's write follows. One file: the fault and its scenario.
"""

from __future__ import annotations

import signal
import time
from dataclasses import replace

import psutil

import backends
from lab.checkers.outcomes import NotRun
from lab.columns import Column, FaultFamily
from lab.faults.base import Fault, FaultNotConfirmed, Route, Target
from lab.faults.own_server import OwnLockServer
from lab.pacing import Exclusive
from lab.servers.abilities import Pausable, RedlockMasters
from scenarios._lease_faults import LeaseFaultScenario, lease_params
from scenarios._own_store import OnOwnStore, on_own_store
from scenarios.base import TrialSpec


class ServerPauseFault(OwnLockServer, Fault):
    """SIGSTOP every process of the lock's server; confirmed by each one's state T (stopped).

    It strikes one lock server the lab started (Pausable: the lab knows its pids) that is not the run's
    PostgreSQL, which also takes the writes; independent masters (Redlock's) are not one server. Where the lab
    started the run's Redis, etcd or ZooKeeper, the trial's lock is on a server of its own (lab/faults/own_server.py),
    and a MariaDB lock's trial runs whole on a MariaDB of its own (scenarios/_own_store.py), so the pause reaches no
    other trial, a shared fault event's subjects in another lane included."""

    name = "server_pause"
    label = "lock server paused past the TTL"
    needs_server = Pausable
    no_server = "pausing a lock server needs one the lab started; it never stops yours"

    def __init__(self) -> None:
        super().__init__()
        self.stopped: list[int] = []

    def prepare(self, services, backend_cls) -> None:
        self.start_own(services, backend_cls)

    def route(self, services, backend_cls) -> Route:
        return self.own_route(services, backend_cls)

    def close(self) -> None:
        self.stop_own()

    def applies_to(self, backend_cls) -> str | None:
        if backend_cls.lock_service == "postgres":
            # The fault reaches such a lock: the lab only cannot pause the server every other trial writes to.
            return NotRun("its lock is on the run's PostgreSQL, which every other trial of the run writes to: the lab "
                          "does not pause it")
        return None

    def cannot_run(self, backend_cls, services) -> str | None:
        reason = super().cannot_run(backend_cls, services)
        if reason is None and isinstance(services.embedded.get(backend_cls.lock_service), RedlockMasters):
            return NotRun("its lock is on independent Redis masters, not one server: redlock_restart strikes them "
                          "one by one")
        return reason

    def inject(self, target: Target) -> None:
        server = self.lab_server(target.services, target.backend_cls.lock_service)
        for pid in server.pids:
            psutil.Process(pid).send_signal(signal.SIGSTOP)
            self.stopped.append(pid)

    def confirm(self, target: Target, within: float = 5.0) -> dict:
        if not self.stopped:
            raise FaultNotConfirmed("the lock's server had no process to stop")
        deadline = time.monotonic() + within
        while True:
            states = {pid: _state(pid) for pid in self.stopped}
            if all(state == psutil.STATUS_STOPPED for state in states.values()):
                return {"fault": self.name, "service": target.backend_cls.lock_service, "pids": list(self.stopped),
                        "process_state": "T"}
            if time.monotonic() > deadline:
                raise FaultNotConfirmed(f"the lock's server was not stopped {within:g} s after SIGSTOP: {states}")
            time.sleep(0.005)  # the kernel has no event for "stopped"; its state is polled

    def heal(self, target: Target) -> dict:
        for pid in self.stopped:
            try:
                psutil.Process(pid).send_signal(signal.SIGCONT)
            except psutil.NoSuchProcess:
                pass
        return {}


def _state(pid: int) -> str:
    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return "gone"


class ServerPause(OnOwnStore, LeaseFaultScenario):
    name = "server_pause"
    fault = ServerPauseFault
    summary = ("the lock's own server (Redis, etcd, ZooKeeper) SIGSTOPped past the TTL mid-hold, then SIGCONTed; a "
               "contender tries meanwhile")
    title = "lock server paused past the TTL"
    columns = (
        Column("sigstop", "lock server paused past the TTL", 10.5,
               "the server that holds the lease (Redis, etcd, ZooKeeper) SIGSTOPped for longer than the TTL, then "
               "SIGCONTed; confirmed by every server process in state T (stopped)",
               family=FaultFamily.PAUSES, happens_when=()),
    )
    # A trial on a server the run's trials share runs with none of them beside it (exclusive).
    pacing = replace(LeaseFaultScenario.pacing, exclusive=Exclusive.PER_TRIAL)

    def exclusive(self, spec: TrialSpec, services) -> bool:
        """Its pacing's Exclusive.PER_TRIAL, a hook because it depends on the backend and the servers: alone unless
        the trial stops a server of its own (a Redis, etcd or ZooKeeper lock where the lab started the run's, or a
        MariaDB lock's whole trial on a MariaDB of its own, scenarios/_own_store.py): stopping a server the run's
        trials share reaches all of theirs."""
        cls = backends.load(spec.backend)
        return not (ServerPauseFault.own_server(cls, services) or on_own_store(cls, services))

    params = lease_params(parallel=4)  # each trial stops a server of its own (lab/faults/own_server.py): several at once
