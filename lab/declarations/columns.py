"""What a fault declares about itself for the report: its columns, their headings and one-line legends.

A scenario that injects a fault declares one `FaultColumns` beside its code (scenarios/<name>.py); a run
records the declarations in its meta.json, and the report reads them from there, so a saved run renders
from its folder alone. The matrix, the told table, the lease table, the decision page and the timeline
gallery all read these; none keeps a list of faults of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from lab.declarations.described_enum import DescribedStrEnum
from lab.stack.exposure import When, conditions_from_json, conditions_to_json
from lab.declarations.where import Where


class FaultFamily(DescribedStrEnum):
    """Which kind of fault a column is: the report's summary matrix has one column per family, each cell the worst
    of its family's cells. Declared by each column beside its code, recorded in meta.json; the members' order is
    the summary's column order."""

    IDLE_GUARDS = "idle_guards", "a server's idle guard (idle_in_transaction, idle_session) ends the lock's session"
    DETECTOR = "detector", "the lock's session killed outright: does the holder's detector see the loss, and how soon"
    TWO_RUNS = "two_runs", "no fault: two runs rebuild one company at once, the lock's plain job"
    KILL_POINTS = "kill_points", "a run killed at a point of its write (after its delete, or where hypothesis searches)"
    PAUSES = "pauses", "the holder or the lock's server stopped (SIGSTOP) past the TTL, then resumed"
    CLOCKS = "clocks", "a clock jumped or ran fast: the holder's or a lock server's"
    NETWORK = "network", "the lock's connection cut, slowed, lossy or dropped, or a lock service's member partitioned"
    RESTARTS = "restarts", "a lock server restarted, with or without what it persisted"
    FAILOVER = "failover", "a server of the lock or of the writes failed over to a replica, as the lab scripts it"
    MANAGED_FAILOVER = "managed_failover", "a failover run by a manager: Patroni, Redis Sentinel"
    POOLERS = "poolers", "the lock's connection through a pooler (PgBouncer)"
    OTHER = "other", "a column its run declared no family for (recorded before columns declared one)"

    @property
    def meaning(self) -> str:
        """Its sentence, as declared."""
        return self.__doc__ or ""

    @property
    def heading(self) -> str:
        """The summary matrix's heading for it: 'managed failover'."""
        return self.value.replace("_", " ")

    @classmethod
    def read(cls, value: object) -> FaultFamily:
        """A family as meta.json recorded it; OTHER for none (a run recorded before families) or one this lab
        does not know (a run of a newer lab)."""
        known = {f.value: f for f in cls}
        return known.get(value, cls.OTHER) if isinstance(value, str) else cls.OTHER


@dataclass(frozen=True)
class Column:
    """One column of the backends x faults matrix: one variant of a scenario."""

    variant: str
    label: str  # the heading in the matrix
    order: float  # its place among every scenario's columns: the order a reader meets the faults in the post
    legend: str  # one line: what the fault does, and what confirms in each trial that it struck
    family: FaultFamily = FaultFamily.OTHER  # every registered scenario declares one (test_fault_families.py)
    # The server setting whose timer is this column's fault (an idle guard a DBA sets), or None: the decision
    # page finds the post's own situation (a default connection under a DBA's guard) by it, never by a name.
    setting: str | None = None
    # The variant of the same scenario whose fault this column repeats under another configuration (Patroni's
    # synchronous_mode, Redis' appendfsync always), or None: the report sets a store's loss beside the
    # configuration that avoided it by this declaration.
    same_fault_as: str | None = None
    # The stack traits under which this fault can happen at all (lab/stack/exposure.py): every condition must hold, and
    # () means every stack. None: not declared (a run recorded before columns declared it); the advice then takes
    # the lab's own declaration, or, without one, every stack, and says so.
    happens_when: tuple[When, ...] | None = None
    # The services its fault can strike, with the same fallback; None: whichever service holds the lock (a holder
    # paused, a lock server restarted). A lock on none of them is out of its reach, whatever the stack.
    strikes: tuple[str, ...] | None = None
    # The kinds of right its fault bears on, as capabilities a lock declares (lab/declarations/capabilities.py): a lock with none
    # of them is out of its reach wherever it lives (a clock or a slow network bears on a lease's TTL alone). Empty:
    # every lock's. spared_by: capabilities that put a lock out of its reach (a replica held behind a grant that is
    # no write). With strikes, the whole of what makes a cell n/a; anything else the lab cannot run is *not run*.
    needs: tuple[str, ...] = ()
    spared_by: tuple[str, ...] = ()
    # Capabilities whose right this fault reaches but cannot take away, and why, in one clause: a transaction pooler
    # keeps each transaction on one server session, so a lock that lives inside the write's transaction keeps it. The
    # cell still runs; where every trial kept the company whole and nobody else got in (○), the decision reads it as
    # *unaffected* with this reason, checked by those trials, instead of a ○ that proves nothing.
    cannot_take: tuple[str, ...] = ()
    cannot_take_why: str = ""

    def reaches(self, where: Where, capabilities: Iterable[str]) -> bool:
        """Whether, by a lock's declarations (where its lock, fence and writes live; its capabilities), this column's
        fault reaches its lock, its fence or its writes: a cell may be n/a only where it does not."""
        held = {str(c) for c in capabilities}
        struck = set(self.strikes) if self.strikes is not None else {where.lock}
        return bool(struck & where.services()) and (not self.needs or bool(held & set(self.needs))) \
            and not held & set(self.spared_by)

    def to_json(self) -> dict:
        return {**asdict(self), "family": self.family.value, "happens_when": conditions_to_json(self.happens_when)}

    @classmethod
    def from_json(cls, data: dict) -> Column:
        """A column as meta.json recorded it; a field a run recorded before it existed takes its default (a family:
        OTHER), and one this lab does not know is left out."""
        strikes = data.get("strikes")
        known = {name for name in cls.__dataclass_fields__}
        return cls(**{**{k: v for k, v in data.items() if k in known}, "family": FaultFamily.read(data.get("family")),
                      "happens_when": conditions_from_json(data.get("happens_when")),
                      "strikes": None if strikes is None else tuple(strikes),
                      "needs": tuple(data.get("needs") or ()), "spared_by": tuple(data.get("spared_by") or ()),
                      "cannot_take": tuple(data.get("cannot_take") or ())})

    def cannot_take_from(self, capabilities: Iterable[str]) -> str | None:
        """Why this fault cannot take away the right of a lock with these capabilities, or None where it can."""
        held = {str(c) for c in capabilities}
        return self.cannot_take_why if held & set(self.cannot_take) and self.cannot_take_why else None


@dataclass(frozen=True)
class FaultColumns:
    """A scenario's fault: its title, its columns, and which of the report's fault tables it belongs to."""

    scenario: str
    title: str  # the fault in a few words, as the told and lease tables head its column
    columns: tuple[Column, ...]
    breaks_leases: bool = False  # the lease-fault trial shape: a holder hit mid-hold, a contender, the write
    replicated: bool = False  # the lock service loses one of its servers (a standby, a replica, a member)
    # The scripted scenario a managed failover is set beside (redis_failover for Sentinel's, failover for
    # Patroni's), or None; the report's scripted-beside-managed section pairs them by it.
    control: str | None = None

    @property
    def order(self) -> float:
        return min(c.order for c in self.columns)

    def to_json(self) -> dict:
        return {"title": self.title, "columns": [c.to_json() for c in self.columns],
                "breaks_leases": self.breaks_leases, "replicated": self.replicated, "control": self.control}

    @classmethod
    def from_json(cls, scenario: str, data: dict) -> FaultColumns:
        return cls(scenario, data["title"], tuple(Column.from_json(c) for c in data["columns"]),
                   bool(data.get("breaks_leases")), bool(data.get("replicated")),
                   data.get("control"))  # a run recorded before controls existed has none


def from_meta(meta: dict) -> list[FaultColumns]:
    """The fault declarations a run's meta.json recorded, in column order."""
    found = [FaultColumns.from_json(s, d) for s, d in (meta.get("faults") or {}).items()]
    return sorted(found, key=lambda f: (f.order, f.scenario))


def to_meta(declared: list[FaultColumns]) -> dict:
    return {"faults": {f.scenario: f.to_json() for f in declared}}
