"""What a backend and the lab exchange: its context, the hook at named points, and how a rebuild ended.

These types sit below the backends so that a run's job (lab/workload/job.py) and a holder process (lab/holder/)
can use any backend without importing one. Plugin authors get them from backends.api.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

from sqlalchemy.engine import Connection, Engine

from lab.errors import LabError
from lab.servers.services import Services
from lab.workload.table import CompanyTable

# The named moments of a rebuild, in order, at which a scenario or a fault may act. "after_lock" comes
# once a lock or fence inside the write holds the company; "mid_insert" only when the insert is split.
POINTS = ("begin", "after_lock", "before_delete", "after_delete", "mid_insert", "before_commit", "after_commit")

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
    def company_table(self) -> CompanyTable:
        """The table a rebuild writes; a context made to lock only (no table) has none to rebuild."""
        if self.table is None:
            raise LabError("this backend context has no company table: it was made to lock, not to rebuild")
        return self.table

    @property
    def lock_services(self) -> Services:
        """The addresses a backend opens its lock connection to: the one hook every proxy and cut uses."""
        return self.routed if self.routed is not None else self.services


# The outcome recorded for a run that wrote nothing: it was refused, or never got to its write.
NO_WRITE = "none"


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
