"""What every fault is: inject, confirm, heal, as Jepsen's nemeses are, plus the evidence it struck.

A fault that cannot confirm it struck its target raises FaultNotConfirmed: the trial
becomes an error, never a verdict. heal() is idempotent and always runs, even when the
trial fails, so no holder stays stopped and no connection stays cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from sqlalchemy.engine import URL, Engine

from lab.errors import LabError
from lab.declarations.skips import NotRun
from lab.declarations.where import Where
from lab.servers.services import Services


class FaultNotConfirmed(LabError):
    """The fault was injected but nothing shows it reached its target."""


# Faults sit below the workload, the holder and the backends, so what they read of those is declared here.
class LockClass(Protocol):
    """What a fault reads of a backend's class (a backends.base.Backend subclass)."""

    @property
    def name(self) -> str: ...

    @property
    def lock_service(self) -> str: ...

    @property
    def lock_routable(self) -> bool: ...

    @property
    def capabilities(self) -> frozenset: ...

    def holds_across_writes(self) -> bool: ...

    def where(self) -> Where: ...


class HolderProc(Protocol):
    """The holder's process as a fault acts on it: subprocess.Popen, or a holder the fork server started."""

    pid: int

    def poll(self) -> int | None: ...

    def send_signal(self, sig: int) -> None: ...


class HolderHandle(Protocol):
    """What a fault may do to the holder (a lab.holder HolderProcess): act on its process, read what it reports."""

    @property
    def proc(self) -> HolderProc: ...

    def wait_for(self, name: str, timeout: float) -> dict:
        """The holder's next report called name (a clock reading); TimeoutError when none comes."""


@dataclass
class Target:
    """What a fault acts on in one trial: the servers, the holder and the sessions it holds."""

    services: Services
    monitor: Engine
    backend_cls: LockClass
    holder: HolderHandle | None = None  # a lab.holder HolderProcess, for faults that act on the process
    lock_pid: int | None = None  # PostgreSQL pid of the lock's own session, when there is one
    write_pid: int | None = None  # PostgreSQL pid of the write transaction the holder is inside, if any
    evidence: dict = field(default_factory=dict)
    ttl: float | None = None  # the lease's TTL as the server granted it, for a fault whose size is a share of it


@dataclass
class Route:
    """Addresses a holder must use so that a fault can reach its lock connection."""

    lock_services: Services | None = None  # the lock's own connection (session lock, lease, Redis, etcd)
    writes_url: URL | None = None  # the writes' connection, when the lock lives inside the write
    netns: int | None = None  # a network namespace the holder must run in for the fault to reach its packets
    holder_services: Services | None = None  # every server as the holder reaches them from there, when not as the lab does
    # lock_services are servers the fault started for this trial (a server on a fake clock): the contender's
    # lock goes there too, and the lock's storage is made there; otherwise they are a path to the run's servers
    # (a proxy) that the contender does not take.
    own_servers: bool = False
    holder_environment: dict[str, str] | None = None  # what the holder process must start with (a clock's preload)


class Fault:
    """Base of every fault; subclasses set name and label and override what they need."""

    name: ClassVar[str]
    label: ClassVar[str]  # the matrix column heading
    # The service whose servers the fault acts on, whichever part of a lock lives there (lab/declarations/where.py): it
    # applies to a backend whose lock, fence or writes live on it, and is n/a only for one with none there.
    # None: it acts on the lock's own server, connection or holder, which every lock has.
    strikes: ClassVar[str | None] = None
    # True when, on a server the lab did not start, the user's `--fault-command NAME=CMD` performs it
    commandable: ClassVar[bool] = False
    # What the lab-started server of the backend's lock service must be able to do (lab/servers/abilities.py),
    # and the reason when it cannot (the fault never acts on a server the lab did not start): *not run*, a lab limit.
    needs_server: ClassVar[type | None] = None
    no_server: ClassVar[str] = ""
    # When the contender asks, in TTLs from the moment the fault confirmed, and how long it keeps asking; None:
    # one TTL and a grace later (the lease has lapsed by then), for one more TTL. A clock fault asks at once,
    # while the holder's lease still runs on every clock but the one the fault moved.
    ask_after_ttls: ClassVar[float | None] = None
    patience_ttls: ClassVar[float | None] = None
    ask_by_ttls: ClassVar[float | None] = None  # and it stops by this many TTLs after the holder's grant
    # When the fault heals, in TTLs from the moment the contender began asking, while it goes on asking for the rest of
    # its patience; None: once it is in or has given up. A fault that stops the server the contender asks (a paused
    # server) declares it, else a contender whose requests time out while the server stands still would have given up
    # before the server could answer anyone, and the trial would say nothing of the moment it resumes.
    heals_after_asking_ttls: ClassVar[float | None] = None

    def missing(self) -> str | None:
        """What this machine lacks for the fault (an operating-system package, in the lab's one line), or None:
        its cells then say 'does not run' with that line."""
        return None

    def applies_to(self, backend_cls) -> str | None:
        """Why this fault cannot strike this backend by its declarations alone, or None: by default, n/a only when the
        service it strikes holds none of the lock's parts. A plain string is n/a, which the fault's column must
        declare (Column.reaches, tests/fast/test_fault_declarations.py); what the lab cannot make is NotRun."""
        if self.strikes is None:
            return None
        return backend_cls.where().unreached_by(self.strikes, f"a fault of {self.strikes}")

    def cannot_run(self, backend_cls, services: Services) -> str | None:
        """Why this fault cannot strike this backend on these servers, or None: applies_to's n/a, or, where the fault
        would reach the lock but the lab will not make it on these servers (one it did not start), *not run*."""
        reason = self.applies_to(backend_cls)
        if reason is None and self.needs_server is not None:
            if not isinstance(services.embedded.get(backend_cls.lock_service), self.needs_server):
                return NotRun(self.no_server)
        return reason

    def prepare(self, services: Services, backend_cls) -> None:
        """Set up what the fault needs before the holder takes its lock (a server setting)."""

    def route(self, services: Services, backend_cls) -> Route:
        """Addresses the holder must use (a cut puts a proxy in the path); by default the servers' own."""
        return Route()

    def inject(self, target: Target) -> None:
        raise NotImplementedError

    def confirm(self, target: Target) -> dict:
        """Evidence that the fault struck its target; FaultNotConfirmed when there is none."""
        raise NotImplementedError

    def heal(self, target: Target) -> dict:
        """Undo the fault (idempotent); returns evidence gathered while healing."""
        return {}

    def readings(self) -> list[tuple[float, dict]]:
        """What the fault measured over the trial, for its history: (monotonic time, value) pairs, such as a
        server's clock against the real one."""
        return []

    def close(self) -> None:
        """Release what prepare() and route() set up (proxies, servers of its own); called once, after the trial."""


class GradedFault(Fault):
    """A fault whose size is one number, strength, in TTLs of the lease it strikes (a clock jump of strength x TTL,
    a delay of strength x TTL): what the margin search (lab/measures/margin.py) varies. A subclass declares the
    strength its plain instance has (its matrix column's)."""

    default_strength: ClassVar[float]

    def __init__(self, strength: float | None = None):
        self.strength = self.default_strength if strength is None else float(strength)
