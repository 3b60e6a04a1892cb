"""The one interface every lock strategy implements, and what it declares about itself.

A backend decides how a run gets the right to rebuild a company, where the
writes happen relative to that right, and how the run learns it lost it.
Capabilities are data: a scenario that needs one a backend lacks skips it with
the reason instead of failing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Callable, ClassVar

from sqlalchemy.engine import Connection, Engine

from lab.services import Services
from lab.workload import CompanyTable, no_point  # noqa: F401  (re-exported for backends)

# Capabilities a backend may declare, and what each promises.
CAPABILITIES = {
    "session_lock": "holds a PostgreSQL session advisory lock for the whole run, on its own connection",
    "in_transaction": "takes its lock inside the write transaction, so lock and writes end together",
    "fencing": "the storage checks a token in the write transaction and refuses a lapsed holder",
    "lease_expiry": "the right is a lease with a TTL that lapses unless renewed",
    "exclusion": "promises that two runs never rebuild the same company at once",
    "serializable": "no lock: SERIALIZABLE aborts one of two conflicting rebuilds and the run retries it",
}

# A hook called at named moments of a rebuild (begin, after_lock, before_delete, after_delete,
# before_commit, after_commit) with the write's connection, so a scenario or a fault can act
# at an exact point of the transaction (or end exactly that session).
Point = Callable[[str, "Connection | None"], None]


@dataclass
class BackendContext:
    """What a backend instance may use: the servers, shared pools, the table it rebuilds."""

    services: Services
    monitor: Engine  # AUTOCOMMIT pool for observing (pg_locks, pg_stat_activity) and faults
    writes: Engine  # pool for the runs' write transactions, as the post's job had
    table: CompanyTable | None = None
    lock_settings: dict = field(default_factory=dict)  # server settings for the lock's own session
    options: dict = field(default_factory=dict)  # strategy knobs a scenario varies (isolation, lock_timeout_ms...)
    routed: Services | None = None  # where the lock's own connection goes when a fault puts a proxy in its path

    @property
    def lock_services(self) -> Services:
        """The addresses a backend opens its lock connection to: the one hook every proxy and cut uses."""
        return self.routed if self.routed is not None else self.services


@dataclass
class RebuildResult:
    """How one company rebuild ended: committed, failed (rolled back), rejected (fenced) or indeterminate.

    indeterminate: the connection broke while COMMIT was in flight, so the client cannot know
    whether it committed; `resolved` then says what a read on a fresh connection found:
    "committed", "not committed", or "unknown" when that read failed too.
    """

    outcome: str
    deleted: int | None = None
    waited: float = 0.0  # seconds spent waiting for the lock
    attempts: int = 1
    error: str | None = None
    sqlstate: str | None = None
    failed_attempts: list = field(default_factory=list)  # errors of attempts that were retried
    resolved: str | None = None  # for "indeterminate" only: committed / not committed / unknown

    def to_dict(self) -> dict:
        return asdict(self)


def describe_error(exc: BaseException) -> str:
    """'OperationalError: first line of the message', the form the report prints."""
    orig = getattr(exc, "orig", None)
    shown = orig if orig is not None else exc
    lines = [ln.strip() for ln in str(shown).splitlines() if ln.strip()]
    return f"{type(shown).__name__}: {lines[0]}" if lines else type(shown).__name__


class Backend(ABC):
    """A lock strategy, instantiated once per run (holder or contender) with its own key."""

    name: ClassVar[str]
    summary: ClassVar[str]
    capabilities: ClassVar[frozenset[str]] = frozenset()
    services: ClassVar[tuple[str, ...]] = ("postgres",)
    # Which of its services holds the lock; a class that does not set it gets the one service
    # that is not PostgreSQL, else PostgreSQL.
    lock_service: ClassVar[str] = ""
    # True when the lock connection is opened to ctx.lock_services (or, for a lock inside the write,
    # through ctx.writes), so a proxy can carry it; a backend that cannot promise that says False.
    lock_routable: ClassVar[bool] = True
    ddl: ClassVar[list[str]] = []  # what it keeps in the lab's schema; created once per run

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "lock_service" not in cls.__dict__:  # derived again for each subclass, from its own services
            others = [s for s in cls.services if s != "postgres"]
            cls.lock_service = others[0] if len(others) == 1 else "postgres"

    @classmethod
    def holds_across_writes(cls) -> bool:
        """True when the right is held between writes on a connection of its own (a session lock, a lease)."""
        return bool({"session_lock", "lease_expiry"} & cls.capabilities)

    def __init__(self, ctx: BackendContext, key: str):
        self.ctx = ctx
        self.key = key

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

    def touch(self) -> None:
        """Run one more query on the lock's own session (the naive 'am I still alive?' check)."""
        raise NotImplementedError(f"{self.name} has no lock session to query")

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


class NoRunLock(Backend):
    """A strategy with no run-level right: nothing to take, hold or give back between writes."""

    def acquire(self) -> bool:
        return True

    def held(self) -> bool:
        return False

    def release(self) -> None:
        return None
