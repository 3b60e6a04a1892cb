"""The needs an engineer comes with: who may be a candidate (by declaration) and the harm each is decided on.

Admission is by what a lock declares (that it promises exclusion at all, where its writes go, whether it is held
across the run's transactions), never by its name, so a plugin lands where it qualifies. A strategy that promises no
exclusion (no lock, an idempotent upsert, SERIALIZABLE with retry) may keep the company whole, but it lets two runs do
the work at once; a queue that hands each company to one worker changes who picks the company, not how a run keeps
it: each answers a neighbouring question (the post's and the report's *Why not*), never "which lock". The harm is declared beside the need: a lock's cell can
be ◆ for one need and ✗ for another, and the page says which need a mark is read for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from lab.declarations.capabilities import Capability
from lab.decision.harm import Harm
from lab.declarations.where import Service, Where

# What makes a lock one right for a whole run, held between its per-company transactions (as
# Backend.holds_across_writes reads it).
HELD_ACROSS_WRITES = frozenset({Capability.SESSION_LOCK, Capability.LEASE_EXPIRY, Capability.CONNECTION_HELD})


@dataclass(frozen=True)
class Need:
    """A need, which declared locks can serve it at all, and the harm it is decided on."""

    title: str
    serves: Callable[[frozenset, Where], bool]  # (capabilities, where it lives) -> can it serve the need
    why: str  # what a lock must do for it, in one line
    harm: Harm
    short: str = ""  # the need in a few words, for the first screen's table
    names_services: bool = False  # its heading names the lock services its candidates declare


def promises_exclusion(caps: frozenset) -> bool:
    """Whether a backend is a lock a run takes: it promises that two runs never rebuild the same company at once, and
    is not a queue handing companies out (Capability.QUEUE: the job's shape changed, a neighbouring answer)."""
    return Capability.EXCLUSION in caps and Capability.QUEUE not in caps


def held_across_writes(caps: frozenset) -> bool:
    return bool(HELD_ACROSS_WRITES & caps)


NEEDS = [
    Need("One writer per company, every write in PostgreSQL",
         lambda caps, where: where.writes == Service.POSTGRES,
         "the company's rows are in PostgreSQL, wherever the lock lives", Harm.SURVIVING_COMPANY,
         "every write in PostgreSQL"),
    Need("One writer per company, every write in MariaDB",
         lambda caps, where: where.writes == Service.MARIADB,
         "the company's rows are in MariaDB, wherever the lock lives", Harm.SURVIVING_COMPANY, "every write in MariaDB"),
    Need("A run-level lock held across many transactions",
         lambda caps, where: held_across_writes(caps),
         "one right for the whole run, held between its per-company transactions; judged where its writes go, the "
         "database", Harm.SURVIVING_COMPANY, "a run-level lock"),
    Need("Writes outside the database, where nothing can refuse a stale write",
         lambda caps, where: held_across_writes(caps),
         "a file, an API, a message: no fence can be checked there, so two holders at once is the harm itself",
         Harm.TWO_HOLDERS, "writes outside the database"),
    Need("A lock service you already run",
         lambda caps, where: where.lock != where.writes,
         "the lock lives apart from the rows it protects", Harm.SURVIVING_COMPANY, "a lock service you run",
         names_services=True),
]
