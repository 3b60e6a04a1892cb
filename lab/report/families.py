"""Families of locks, by what a backend declares (never by its name): the HTML report's filters, and the
one table each backend's row goes to in the report's matrix.

A filter family may overlap another (a fenced lease is both); the matrix gives each row one table, the
first of PRECEDENCE that holds it, so a reader meets PostgreSQL run-level locks, the locks inside
the write, the lease services and the third-party libraries apart, and the driver rows in a table of
their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from lab.declarations.capabilities import Capability
from lab.report.common import declaration


@dataclass(frozen=True)
class Family:
    """A family of locks the matrix can be narrowed to, by what a backend declares (never by its name)."""

    key: str
    title: str
    member: Callable[[frozenset, str | None, str | None], bool]  # (capabilities, lock service, library)


FAMILIES = [
    Family("run_level", "PostgreSQL run-level locks (a session lock held across the run's transactions)",
           lambda caps, service, library: service == "postgres" and Capability.SESSION_LOCK in caps),
    Family("run_level_mariadb", "MariaDB run-level locks (GET_LOCK held across the run's transactions)",
           lambda caps, service, library: service == "mariadb" and Capability.SESSION_LOCK in caps),
    Family("in_write", "locks inside the write transaction",
           lambda caps, service, library: Capability.IN_TRANSACTION in caps),
    Family("lease", "lease services (a lock with a TTL its holder renews)",
           lambda caps, service, library: Capability.LEASE_EXPIRY in caps),
    Family("fenced", "fenced (the storage checks the holder's token)",
           lambda caps, service, library: Capability.FENCING in caps),
    Family("no_lock", "no lock (the write itself must cope)",
           lambda caps, service, library: Capability.EXCLUSION not in caps),
    Family("library", "third-party lock libraries (adapters)",
           lambda caps, service, library: bool(library)),
]


def families_of(meta: dict, backend: str) -> list[str]:
    """The keys of the families a backend belongs to; none for a backend whose run declared nothing of it."""
    capabilities = declaration(meta, "capabilities", backend)
    if capabilities is None:
        return []
    service, library = declaration(meta, "lock_service", backend), declaration(meta, "libraries", backend)
    return [f.key for f in FAMILIES if f.member(frozenset(capabilities), service, library)]


@dataclass(frozen=True)
class Table:
    """One of the matrix's tables: a heading, and which backends' rows it holds."""

    key: str
    title: str
    holds: Callable[[str, list[str]], bool]  # (backend label, its filter families) -> is its row here


TABLE_ORDER = [  # the order the report shows them in
    Table("run_level", "PostgreSQL run-level locks (held across the run's transactions)",
          lambda backend, families: "run_level" in families),
    Table("run_level_mariadb", "MariaDB run-level locks (GET_LOCK held across the run's transactions)",
          lambda backend, families: "run_level_mariadb" in families),
    Table("in_write", "Locks inside the write transaction, and no lock",
          lambda backend, families: "in_write" in families or "no_lock" in families),
    Table("lease", "Lease services", lambda backend, families: "lease" in families),
    Table("library", "Third-party lock libraries", lambda backend, families: "library" in families),
    Table("drivers", "The session locks on other drivers (`--driver`)", lambda backend, families: "@" in backend),
]
# Which table a row goes to when it fits several: a driver row first, then a library's, then by its kind.
PRECEDENCE = ("drivers", "library", "run_level", "run_level_mariadb", "in_write", "lease")


def table_of(meta: dict, backend: str) -> Table | None:
    """The matrix table a backend's row belongs to; None for a backend the run declared nothing of."""
    families = families_of(meta, backend)
    tables = {t.key: t for t in TABLE_ORDER}
    return next((tables[k] for k in PRECEDENCE if tables[k].holds(backend, families)), None)
