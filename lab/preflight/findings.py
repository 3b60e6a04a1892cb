"""What a preflight found at each address: typed, so the run, the doctor and the tests read the same value.

A `Finding` says what sits at one address (`Sits`), what that means for the locks a job takes there (`meaning`),
and, where the lab cannot measure what it names through that address, the one line that says what to give instead
(`Refusal`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from lab.errors import ServiceError
from lab.stack.description import PoolMode


class Sits(str, Enum):
    """What answers at an address."""

    PRIMARY = "primary"  # the server itself, taking writes (a PostgreSQL out of recovery, a Redis master, ...)
    STANDBY = "standby"  # a PostgreSQL in recovery: a hot standby
    POOLER = "pooler"  # a pooler or proxy in front of the server (its mode in Finding.pool_mode)
    REPLICA = "replica"  # a Redis replica: every write is answered READONLY
    READ_ONLY = "read-only"  # a server that takes no write here (a ZooKeeper in read-only mode, MariaDB read_only)


class Problem(str, Enum):
    """Why the lab will not run against an address, each with what to give instead."""

    TRANSACTION_POOLER = "transaction pooler"
    STANDBY = "standby"
    READ_ONLY_DEFAULT = "read-only default"
    NO_CREATE = "may not create the lab's schema"
    FOREIGN_SCHEMA = "a schema of the lab's name that the lab did not create"
    REPLICA = "replica"
    WRITE_REFUSED = "write refused"
    NOT_A_POOLER = "not a pooler"  # --pg-pooler-dsn names something that lends no server session
    ANOTHER_DATABASE = "another database"  # --pg-pooler-dsn reaches another server or database than --pg-dsn


@dataclass(frozen=True)
class Refusal:
    """Why the lab will not run against an address, and what to give instead: one line, no password."""

    problem: Problem
    found: str  # what sits there, in words, with the evidence ("a standby in recovery (pg_is_in_recovery() = t)")
    give: str  # what to give instead: an address, a flag, a grant

    def line(self, service: str, shown: str) -> str:
        return f"{service} at {shown} {self.found}; give {self.give}"


@dataclass(frozen=True)
class Finding:
    """One address as the preflight found it."""

    service: str  # the lab's name for the service (lab/servers/service_kinds.py)
    shown: str  # the address as given, password hidden
    sits: Sits
    what: str  # what answered, in words: "PostgreSQL 15.18, a primary", "a transaction pooler in front of ..."
    meaning: str  # what that means for the locks a job takes there
    pool_mode: PoolMode | None = None  # for a pooler: its mode as two clients saw it
    refusal: Refusal | None = None
    notes: tuple[str, ...] = ()  # what the run goes on with, worth a line (a session pooler, a guard per role)
    facts: dict[str, Any] = field(default_factory=dict)  # what was read, as plain data for meta.json and --json
    seconds: float = 0.0  # how long the look took

    def line(self) -> str:
        """What the doctor prints first: what answers, and what it means for the locks a job takes."""
        return f"{self.service} at {self.shown}: {self.what}: {self.meaning}"

    def to_json(self) -> dict:
        return {"service": self.service, "address": self.shown, "sits": self.sits.value,
                "pool_mode": None if self.pool_mode is None else self.pool_mode.value, "what": self.what,
                "meaning": self.meaning, "line": self.line(), "notes": list(self.notes),
                "refused": None if self.refusal is None else {
                    "problem": self.refusal.problem.value, "line": self.refusal.line(self.service, self.shown)},
                "facts": self.facts, "seconds": round(self.seconds, 3)}


class AddressRefused(ServiceError):
    """The lab will not run against an address it was given: one line naming what to give instead (exit 2)."""

    def __init__(self, finding: Finding):
        assert finding.refusal is not None
        super().__init__(finding.refusal.line(finding.service, finding.shown))
        self.finding = finding
