"""The one interface every lock strategy implements, and what it declares about itself.

A backend decides how a run gets the right to rebuild a company, where the
writes happen relative to that right, and how the run learns it lost it.
Capabilities are data: a scenario that needs one a backend lacks skips it with
the reason instead of failing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from importlib import metadata
from typing import Callable, ClassVar, Protocol

# The types a backend exchanges with the lab live one layer down, in lab.workload.contract, so a
# run's job and a holder process (lab/workload, lab/holder) need no backend; they are re-exported here and in
# backends.api for plugin authors.
from lab.declarations.capabilities import Capability, describe
from lab.declarations.post_role import PostRole
from lab.servers.postgres.drivers import DEFAULT as DEFAULT_DRIVER
from lab.servers.services import Services
from lab.declarations.where import Where
from lab.workload.contract import (  # noqa: F401
    POINTS,
    BackendContext,
    Point,
    RebuildResult,
    describe_error,
)
from lab.workload.table import CompanyTable, no_point  # noqa: F401  (re-exported for backends)

# Capabilities a backend may declare, and what each promises (lab/declarations/capabilities.py holds them).
CAPABILITIES = describe()

@dataclass(frozen=True)
class BareCall:
    """The lock work a backend wraps, done by its library alone on a connection of its own.

    The latency scenario times it alternately with the backend, on the same kind of connection and
    through the same counting proxy, to hold each backend to its goal: no round trip of its own on
    top of the library call it wraps. Opening the connection is setup, not timed; acquire and
    release are the library's own calls, with no lab code between.
    """

    call: str  # the library call in words, as the report prints it
    acquire: Callable[[], object]  # truthy when granted, as the library says it
    release: Callable[[], object]  # whatever the library returns; it raises when it cannot release
    close: Callable[[], object]  # ends what the bare call opened (what it returns is ignored)


class Backend(ABC):
    """A lock strategy, instantiated once per run (holder or contender) with its own key."""

    name: ClassVar[str]
    summary: ClassVar[str]
    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    services: ClassVar[tuple[str, ...]] = ("postgres",)
    # Which of its services holds the lock; a class that does not set it gets the one service
    # that is not PostgreSQL, else PostgreSQL.
    lock_service: ClassVar[str] = ""
    # Where its fence is checked and where its writes go (lab/declarations/where.py): a fenced lock's fence is checked where its
    # writes go unless it says otherwise; a lock with no fence has none. Every built-in strategy writes the
    # company to PostgreSQL; a backend whose rows live elsewhere declares it.
    fence_in: ClassVar[str | None] = None
    writes_to: ClassVar[str] = "postgres"
    # True when the lock connection is opened to ctx.lock_services (or, for a lock inside the write,
    # through ctx.writes), so a proxy can carry it; a backend that cannot promise that says False.
    lock_routable: ClassVar[bool] = True
    # The third-party package (its PyPI name) whose own lock this backend drives as that library documents
    # it, with no fix of ours: an adapter. Empty for the lab's own strategies. The run records it, so the
    # report can tell the libraries apart without knowing a backend's name.
    library: ClassVar[str] = ""
    # The other PyPI packages its lock client runs on (a library's own client, its framework): their installed
    # versions go into meta.json beside its library's, so a verdict can be traced to the code that produced it.
    packages: ClassVar[tuple[str, ...]] = ()
    # The libpq connection parameters its PostgreSQL lock connection takes from its address (keepalives_idle,
    # tcp_user_timeout...); None: every one (a driver built on libpq). A scenario that tunes one it does not
    # take is n/a for it (netdrop's client keepalives), never run with the parameter silently left out.
    pg_parameters: ClassVar[frozenset[str] | None] = None
    # True when its lock's PostgreSQL connections keep the lab's settings as session state (SET when they connect: a
    # library whose connections the lab cannot give startup options or SET LOCAL per transaction), which a pooler in
    # transaction mode does not carry from one transaction to the next: that combination is not run.
    session_settings: ClassVar[bool] = False
    # The language its lock client is written in: the lab's own and the Python adapters' are Python; a holder
    # program in another language (backends/external.py) says which. The report groups the libraries by it.
    language: ClassVar[str] = "Python"
    # Which of the post's methods or alternatives this backend is (lab/declarations/post_role.py), or None: experiments and
    # report tables that reproduce one of the post's figures pick their backend by it, never by name.
    post_role: ClassVar[PostRole | None] = None
    # Which of the post's methods this lock is on another server (the same connection mode, MariaDB's GET_LOCK for
    # a PostgreSQL advisory lock), or None: the post's cases it reproduces there are named by it, never by its name.
    # A port is not the post's method itself, whose post_role stays one backend's.
    analogue_of: ClassVar[PostRole | None] = None
    ddl: ClassVar[list[str]] = []  # what it keeps in the lab's schema; created once per run
    # The drivers its lock's PostgreSQL connection can be made with (lab/servers/postgres/drivers.py); the lab's
    # own SQLAlchemy engine on psycopg2 unless it says more.
    drivers: ClassVar[tuple[str, ...]] = (DEFAULT_DRIVER,)

    # What a run may read from any backend (a backend without them leaves them None):
    token: int | None = None  # the fencing token of the current grant
    ttl: float | None = None  # the lease's TTL as the lock's server granted it, in seconds
    noticed_loss_at: float | None = None  # monotonic time the backend itself first saw its lock gone
    noticed_loss_how: str | None = None  # what it saw then ("returned False", the exception)
    grant_note: str | None = None  # why a grant the server gave was given back at once (no replica had it)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _settle_declarations(cls)

    @classmethod
    def where(cls) -> Where:
        """Where its lock, its fence and its writes live: what decides which faults reach it."""
        return Where(lock=cls.lock_service, writes=cls.writes_to, fence=cls.fence_in)

    @classmethod
    def library_version(cls) -> str | None:
        """The installed version of its library (None: no library, or not installed), as the run records it."""
        if not cls.library:
            return None
        try:
            return metadata.version(cls.library)
        except metadata.PackageNotFoundError:
            return None

    @classmethod
    def holds_across_writes(cls) -> bool:
        """True when the right is held between writes on a connection of its own (a session lock, a lease)."""
        return bool({Capability.SESSION_LOCK, Capability.LEASE_EXPIRY, Capability.CONNECTION_HELD} & cls.capabilities)

    def __init__(self, ctx: BackendContext, key: str):
        self.ctx = ctx
        self.key = key

    @classmethod
    def driver_skip(cls, driver: str) -> str | None:
        """Why this lock has no form on that driver (n/a), or None."""
        if driver in cls.drivers:
            return None
        return (f"its PostgreSQL connections are made with {' or '.join(cls.drivers)} only (by the lab's engine "
                f"or its library); the driver axis covers the session-lock methods")

    @classmethod
    def cannot_run(cls, services: Services) -> str | None:
        """Why this lock cannot work against these servers at all (checked once per run), or None."""
        return None

    @abstractmethod
    def acquire(self) -> bool:
        """Try once for the run's right to rebuild; False when another run has it."""

    @abstractmethod
    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        """Rebuild one company the way this strategy prescribes."""

    @abstractmethod
    def held(self) -> bool:
        """Whether the lock is held right now, as the lock's server sees it (never by re-acquiring)."""

    @abstractmethod
    def release(self) -> None:
        """Give the lock back; raises LockLost when it was already gone, so a release never lies."""

    def bare_call(self, key: str) -> BareCall | None:
        """The library call this backend wraps, for key, opened to self.ctx.lock_services; None: it wraps
        nothing bare (the report then says so). It may be called on a closed instance: it uses the
        instance's settings (context, options, TTL), never its connections."""
        return None

    def touch(self) -> None:
        """Run one more query on the lock's own session (the naive 'am I still alive?' check)."""
        raise NotImplementedError(f"{self.name} has no lock session to query")

    def read_table(self) -> None:
        """Read the company table on the lock's own session, as a job reading its work list on that connection does
        (on MariaDB the read, not the lock's own SELECT, opens the transaction an idle guard waits for)."""
        raise NotImplementedError(f"{self.name} has no lock session to read a table on")

    @property
    def lock_pid(self) -> int | None:
        """The PostgreSQL backend pid of the lock's session, when there is one."""
        return None

    def suspend(self, seconds: float) -> None:
        """Stop whatever keeps the lock alive in the background for a while (a process-wide pause)."""

    def abandon(self) -> None:
        """Drop every connection without releasing anything, as a killed process would."""
        self.close()

    def close(self) -> None:
        """End every session this instance opened (with invalidate(), never back to a pool)."""


def _settle_declarations(cls):  # untyped, as __init_subclass__ was: mypy reads Capability(c) as a constructor
    """What a Backend subclass declares, as the lab reads it: its plain strings made members, the post's roles only
    where it says so itself, and its lock service and fence derived from its own services and writes where it names
    none."""
    # A plugin may declare plain strings; they become members here, and an unknown one fails its load.
    cls.capabilities = frozenset(Capability(c) for c in cls.capabilities)
    # A subclass is a method of its own: it is the post's method only where it says so itself.
    role = cls.__dict__.get("post_role")
    cls.post_role = None if role is None else PostRole(role)
    analogue = cls.__dict__.get("analogue_of")
    cls.analogue_of = None if analogue is None else PostRole(analogue)
    if "lock_service" not in cls.__dict__:  # derived again for each subclass, from its own services
        others = [s for s in cls.services if s != "postgres"]
        cls.lock_service = others[0] if len(others) == 1 else "postgres"
    if "fence_in" not in cls.__dict__:  # a fence is checked by the storage the writes go to
        cls.fence_in = cls.writes_to if Capability.FENCING in cls.capabilities else None


class BatchRebuilder(Protocol):
    """What a backend declaring Capability.BATCH_REBUILD has besides the Backend interface."""

    def rebuild_batch(self, companies: list[int], rows: int, run_id: str, point: Point = no_point,
                      *, use_copy: bool = False) -> RebuildResult:
        """Rebuild every company in one transaction (the giant-transaction shape)."""


class QueueWorker(Protocol):
    """What a backend declaring Capability.QUEUE has besides the Backend interface."""

    def enqueue(self, companies: list[int]) -> None:
        """The producer's step: one job per company."""

    def rebuild_next(self, rows: int, run_id: str, point: Point = no_point) -> tuple[int | None, RebuildResult]:
        """Claim the next job not done and rebuild its company: (company, result), or (None, skipped)."""


class GuardOnRole(Protocol):
    """What a backend declaring Capability.GUARD_OFF_ON_ROLE has besides the Backend interface."""

    guard_role: str | None  # the role it made, while it exists

    def guard_in_force(self) -> tuple[str, str]:
        """The idle guard its session reads, and where that value comes from (pg_settings.source)."""


class NoRunLock(Backend):
    """A strategy with no run-level right: nothing to take, hold or give back between writes."""

    def acquire(self) -> bool:
        return True

    def held(self) -> bool:
        return False

    def release(self) -> None:
        return None
