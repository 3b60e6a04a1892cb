"""Where a lock lives: the service holding its lock state, the one checking its fence, the one its writes go to.

A fault applies to a backend when it strikes any of the three (an etcd lock fenced in PostgreSQL is
reached by every PostgreSQL fault, through its fence and its writes), and is n/a only when it strikes
none. Backends declare it (backends/base.py), runs record it in meta.json, and faults and the report
read it from there; nothing decides applicability from the lock's service alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum


class Service(StrEnum):
    """A service a lock, its fence or its writes live on, by the name runs record (meta.json's `where`). Code names
    a service by its member, never by a string that could as well be a backend's name (Redis, etcd and Redlock are
    both a service and a built-in lock)."""

    POSTGRES = "postgres"
    MARIADB = "mariadb"
    REDIS = "redis"
    REDLOCK = "redlock"  # Redlock's independent Redis masters
    ETCD = "etcd"
    ZOOKEEPER = "zookeeper"


# The services a lock's company rows can live on: the SQL databases the lab runs its workload on. A lock whose own
# service is one of them lives in a database, not in a lock service of its own.
DATABASES = (Service.POSTGRES, Service.MARIADB)


class Part(str, Enum):
    """One of the three things a fault may strike."""

    LOCK = "lock"  # the lock's own state (a session, a key, a lease, a row)
    FENCE = "fence"  # the token check that refuses a lapsed holder's write
    WRITES = "writes"  # the company's rows


@dataclass(frozen=True)
class Where:
    """The service of each part: `lock` always, `fence` only for a fenced lock, `writes` always."""

    lock: str
    writes: str
    fence: str | None = None

    def parts_on(self, service: str) -> tuple[Part, ...]:
        """The parts that live on a service, in the order lock, fence, writes (empty: none does)."""
        found = [(Part.LOCK, self.lock), (Part.FENCE, self.fence), (Part.WRITES, self.writes)]
        return tuple(part for part, on in found if on == service)

    def services(self) -> frozenset[str]:
        return frozenset(s for s in (self.lock, self.fence, self.writes) if s is not None)

    def describe(self) -> str:
        """'its lock on etcd, its fence and its writes on postgres' (the words an n/a reason quotes)."""
        by_service: dict[str, list[str]] = {}
        for part, service in ((Part.LOCK, self.lock), (Part.FENCE, self.fence), (Part.WRITES, self.writes)):
            if service is not None:
                by_service.setdefault(service, []).append(f"its {part.value}")
        return ", ".join(f"{' and '.join(parts)} on {service}" for service, parts in by_service.items())

    def unreached_by(self, service: str, fault: str) -> str | None:
        """Why a fault striking only `service` cannot reach this lock (its n/a reason), or None when it reaches
        some part of it."""
        if self.parts_on(service):
            return None
        return f"{self.describe()}: {fault} reaches none of them"

    def to_json(self) -> dict:
        return {"lock": self.lock, "fence": self.fence, "writes": self.writes}

    @classmethod
    def from_json(cls, data: dict) -> Where:
        return cls(data["lock"], data["writes"], data.get("fence"))
