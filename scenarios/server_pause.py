"""The lock's server stopped with SIGSTOP for longer than the TTL, then continued: a server, not a holder, paused.

The mirror of `pause`: here the holder runs on and the server that keeps the lock stands still, as a Redis, etcd,
ZooKeeper or database host does in a long GC, a VM migration or a frozen container. A lease's deadline is kept by
the server's clock, which goes on while the process is stopped, so on SIGCONT the lease has lapsed; whether the
holder's renewal or a contender's request reaches the server first decides who holds it then, and the holder's
write follows. A database (PostgreSQL, MariaDB) holding the lock and the writes stops whole: a statement sent to it
waits, the contender's too (nobody gets in while it is paused), and its timers (a lease row's clock_timestamp(),
the idle-in-transaction guard of the holder's sessions) run on, so at SIGCONT whatever expired meanwhile expires at
once. One file: the fault and its scenario.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace

import psutil

import backends
from lab.checkers.outcomes import NotRun
from lab.declarations.columns import Column, FaultFamily
from lab.faults.base import Fault, FaultNotConfirmed, Route, Target
from lab.faults.own_server import OwnLockServer
from lab.declarations.pacing import Exclusive
from lab.servers.abilities import Pausable, RedlockMasters
from lab.declarations.where import DATABASES, Service
from scenarios._lease_faults import LeaseFaultScenario, lease_params
from scenarios._own_store import OnOwnStore, on_own_store
from scenarios.base import Skip, TrialEnv, TrialSpec

NOT_ITS_OWN = ("its lock and its writes are on the {store} the run's trials share, and pausing it would stop them all: the "
               "lab pauses only a {store} of the trial's own, which it starts only where it started the run's")


class ServerPauseFault(OwnLockServer, Fault):
    """SIGSTOP every process of the lock's server, and every process those started; confirmed by each one's state T.

    It strikes one lock server the lab started for the trial alone (Pausable: the lab knows its pids): a Redis,
    etcd or ZooKeeper lock's on a server of its own (lab/faults/own_server.py), a PostgreSQL or MariaDB lock's trial
    whole on a server of its own, its writes and the contender there too (scenarios/_own_store.py), so the pause
    reaches no other trial, a shared fault event's subjects in another lane included. PostgreSQL serves each session
    from a backend process its postmaster forked: the postmaster is stopped first (it forks no more), then every
    process under it, until a listing finds none left running. Independent masters (Redlock's) are not one server."""

    name = "server_pause"
    label = "lock server paused past the TTL"
    needs_server = Pausable
    no_server = "pausing a lock server needs one the lab started; it never stops yours"
    # The contender asks from a TTL (and a grace) after the stop, when the lease has lapsed on the server's clock,
    # for three TTLs; the server is continued 1.5 TTLs in, while it still asks. Nobody is served while the server
    # stands still (a request waits, or times out on the client's timer and is asked again), so what the trial
    # measures is the moment the server resumes: whose request it serves first, the contender's or the holder's.
    patience_ttls = 3.0
    heals_after_asking_ttls = 1.5

    def __init__(self) -> None:
        super().__init__()
        self.stopped: list[int] = []  # the server's processes, each stopped before those it started
        self.continued = False

    def prepare(self, services, backend_cls) -> None:
        self.start_own(services, backend_cls)

    def route(self, services, backend_cls) -> Route:
        return self.own_route(services, backend_cls)

    def close(self) -> None:
        self.stop_own()

    def cannot_run(self, backend_cls, services) -> str | None:
        """Where the fault reaches the lock but the lab will not make it: a server it did not start, or Redlock's
        independent masters; each *not run* with the reason, never n/a. (A database the run's trials share is the
        scenario's to refuse, ServerPause.not_run_here: here the trial's own looks like any server the lab started.)"""
        reason = self.applies_to(backend_cls)
        if reason is not None:
            return reason
        service = backend_cls.lock_service
        server = services.embedded.get(service)
        if not isinstance(server, Pausable):
            return NotRun(self.no_server)
        if isinstance(server, RedlockMasters):
            return NotRun("its lock is on independent Redis masters, not one server: redlock_restart strikes them "
                          "one by one")
        return None

    def inject(self, target: Target) -> None:
        server = self.lab_server(target.services, target.backend_cls.lock_service)
        self.stopped = stop_tree(server.pids)

    def confirm(self, target: Target, within: float = 5.0) -> dict:
        if not self.stopped:
            raise FaultNotConfirmed("the lock's server had no process to stop")
        deadline = time.monotonic() + within
        while True:
            self.stopped += stop_tree(self.stopped, known=self.stopped)  # anything forked as the stop took hold
            states = {pid: _state(pid) for pid in self.stopped}
            if all(state in _STOPPED_OR_ENDED for state in states.values()) and self.stopped[0] in _running(states):
                break
            if time.monotonic() > deadline:
                raise FaultNotConfirmed(f"the lock's server was not stopped {within:g} s after SIGSTOP: {states}")
            time.sleep(0.005)  # the kernel has no event for "stopped"; its state is polled
        evidence = {"fault": self.name, "service": target.backend_cls.lock_service, "pids": list(self.stopped),
                    "process_state": "T", "processes_stopped": len(_running(states))}
        if target.backend_cls.lock_service == Service.POSTGRES:  # a PostgreSQL session's pid is its backend's
            session = target.write_pid if target.write_pid is not None else target.lock_pid
            if session is not None:
                if states.get(session) != psutil.STATUS_STOPPED:
                    raise FaultNotConfirmed(f"the holder's session (backend {session}) was not among the stopped "
                                            f"processes of the lock's server: {states}")
                evidence["holder_session_stopped"] = session
        return evidence

    def heal(self, target: Target) -> dict:
        """SIGCONT every stopped process, those the postmaster started first (idempotent)."""
        if self.continued or not self.stopped:
            return {}
        self.continued = True
        for pid in reversed(self.stopped):
            try:
                psutil.Process(pid).send_signal(signal.SIGCONT)
            except psutil.NoSuchProcess:
                pass
        return {"still_stopped_after_heal": [pid for pid in self.stopped if _state(pid) == psutil.STATUS_STOPPED]}


_STORE_NAMES = {Service.POSTGRES: "PostgreSQL", Service.MARIADB: "MariaDB"}
# A process of the server that ended while its parent was stopped stays a zombie until the parent reaps it.
_STOPPED_OR_ENDED = (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE, "gone")


def _running(states: dict[int, str]) -> list[int]:
    """The processes stopped alive (not those that had ended by the time they were read)."""
    return [pid for pid, state in states.items() if state == psutil.STATUS_STOPPED]


def stop_tree(roots: list[int], known: list[int] | None = None) -> list[int]:
    """SIGSTOP each root process, then every process under it, a parent before its children; the pids newly
    stopped, in that order (known: pids already stopped, which are listed for children but not stopped again).

    Fast on purpose: between the first stop and the last the server's other processes run on, and a backend whose
    idle guard expires in that window ends its session before the pause reaches it (a listing of children by
    scanning every process of the machine took over a second for a PostgreSQL's dozen on two busy cores)."""
    seen, stopped, pending = set(known or ()), [], list(roots)
    while pending:
        pid = pending.pop(0)
        if pid not in seen:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                continue
            seen.add(pid)
            stopped.append(pid)
        pending += [child for child in _children(pid) if child not in seen]
    return stopped


def _children(pid: int) -> list[int]:
    """The processes pid started, as the kernel lists them for each of its threads (/proc/PID/task/TID/children),
    without a scan of every process; psutil's scan where the kernel does not keep those lists."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    found: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as listed:
                found += [int(child) for child in listed.read().split()]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # a thread that ended meanwhile
            try:
                return [child.pid for child in psutil.Process(pid).children()]
            except psutil.NoSuchProcess:
                return []
        except ProcessLookupError:
            continue
    return found


def _state(pid: int) -> str:
    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return "gone"


class ServerPause(OnOwnStore, LeaseFaultScenario):
    name = "server_pause"
    fault = ServerPauseFault
    summary = ("the lock's own server (Redis, etcd, ZooKeeper, or a PostgreSQL or MariaDB with the writes) SIGSTOPped "
               "past the TTL mid-hold, then SIGCONTed; a contender tries meanwhile")
    title = "lock server paused past the TTL"
    columns = (
        Column("sigstop", "lock server paused past the TTL", 10.5,
               "the server that holds the lock (Redis, etcd, ZooKeeper; a PostgreSQL or MariaDB of the trial's own "
               "with its writes) SIGSTOPped for longer than the TTL, then SIGCONTed; confirmed by every server "
               "process in state T (stopped), a PostgreSQL's postmaster and every backend, the holder's among them",
               family=FaultFamily.PAUSES, happens_when=()),
    )
    # A trial on a server the run's trials share runs with none of them beside it (exclusive).
    pacing = replace(LeaseFaultScenario.pacing, exclusive=Exclusive.PER_TRIAL)

    def exclusive(self, spec: TrialSpec, services) -> bool:
        """Its pacing's Exclusive.PER_TRIAL, a hook because it depends on the backend and the servers: alone unless
        the trial stops a server of its own (a Redis, etcd or ZooKeeper lock where the lab started the run's, or a
        PostgreSQL or MariaDB lock's whole trial on a server of its own, scenarios/_own_store.py): stopping a server
        the run's trials share reaches all of theirs."""
        cls = backends.load(spec.backend)
        return not (ServerPauseFault.own_server(cls, services) or on_own_store(cls, services))

    def not_run_here(self, backend_cls, services) -> str | None:
        """Why a trial of this lock cannot run on these servers although the fault reaches it (*not run*), or None:
        a lock in a database is paused only on a server of the trial's own (on_own_store), with its writes."""
        store = backend_cls.lock_service
        if store in DATABASES and not on_own_store(backend_cls, services):
            return NotRun(NOT_ITS_OWN.format(store=_STORE_NAMES.get(store, store)))
        return None

    def run_trial(self, env: TrialEnv) -> dict:
        reason = self.not_run_here(backends.load(env.spec.backend), env.services)
        if reason is not None:
            raise Skip(reason)
        return super().run_trial(env)

    params = lease_params(parallel=4)  # each trial stops a server of its own (lab/faults/own_server.py): several at once
