"""A stack as report.html names it: the services it runs and a value (or unknown) for each trait
lab/stack/exposure.py declares, kept in the page's URL as a query (`?stack=postgres,redis&postgres.pooler=transaction`),
and the named stacks the page answers for (PANEL_STACKS).

`stack_of` builds the Stack (lab/stack/description.py) whose traits read exactly as chosen, the stack the advice
(lab/report/advice.py) answers for; tests/fast/test_stack_choices.py holds the query and the stack to each other. A fact no trait decides is left unknown; where the panel says only on or off, the stack gets
the smallest figure that reads so (a guard of 1 ms, one replica, two etcd members).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, TypeVar
from urllib.parse import parse_qsl, urlencode

from lab.errors import LabError
from lab.stack.exposure import NO, OFF, ON, TRAITS, YES, Trait
from lab.stack.description import (Appendfsync, Etcd, Guard, Patroni, PoolMode, Postgres, Redis, Redlock, Replication, Sentinel,
                       Stack, Unknown, Watchdog, ZooKeeper)

# The lock services a stack may describe, in the stack file's order: each trait belongs to one (lab/stack/exposure.py).
SERVICES = ("postgres", "redis", "redlock", "etcd", "zookeeper")
SERVICES_KEY = "stack"  # the query's key for the services; every other key is a trait
NOT_CHOSEN = Unknown("left unknown in report.html's stack panel")
PANEL = "chosen in report.html's stack panel"
REDLOCK_MASTERS = 3  # no trait decides it: the count a Redlock usually asks a majority of

T = TypeVar("T")


def stack_of(services: Iterable[str], values: Mapping[Trait, str]) -> Stack:
    """The stack running `services`, each trait as `values` gives it and every other fact unknown."""
    have = set(services)
    wrong = sorted(have - set(SERVICES))
    if wrong:
        raise LabError(f"no service {wrong[0]!r} in a stack (services: {', '.join(SERVICES)})")

    def pick(trait: Trait, known: Callable[[str], T]) -> T | Unknown:
        value = values.get(trait)
        if value is None:
            return NOT_CHOSEN
        if value not in trait.info.values:
            raise LabError(f"{trait.value}: {value!r} is not one of {', '.join(trait.info.values)}")
        return known(value)

    def patroni(value: str) -> Patroni | None:
        if value == "none":
            return None
        return Patroni(NOT_CHOSEN, NOT_CHOSEN, pick(Trait.SYNCHRONOUS_MODE, lambda v: v == ON), NOT_CHOSEN,
                       pick(Trait.FAILSAFE_MODE, lambda v: v == ON),
                       pick(Trait.WATCHDOG, lambda v: Watchdog.REQUIRED if v == ON else Watchdog.OFF),
                       NOT_CHOSEN, NOT_CHOSEN, NOT_CHOSEN, NOT_CHOSEN)

    def guard(value: str) -> Guard:
        return Guard(1 if value == ON else 0, PANEL)

    postgres = Postgres(NOT_CHOSEN, pick(Trait.IDLE_IN_TRANSACTION_GUARD, guard), pick(Trait.IDLE_SESSION_GUARD, guard),
                        pick(Trait.POOLER, PoolMode), NOT_CHOSEN, pick(Trait.REPLICATION, Replication),
                        pick(Trait.HA_MANAGER, patroni))
    redis = Redis(NOT_CHOSEN, pick(Trait.REDIS_APPENDFSYNC, Appendfsync), NOT_CHOSEN,
                  pick(Trait.REDIS_REPLICAS, lambda v: int(v == YES)),
                  pick(Trait.REDIS_MIN_REPLICAS_TO_WRITE, lambda v: int(v == ON)),
                  pick(Trait.REDIS_SENTINEL, lambda v: Sentinel(NOT_CHOSEN, NOT_CHOSEN, NOT_CHOSEN) if v == YES else None))
    redlock = Redlock(REDLOCK_MASTERS, pick(Trait.REDLOCK_APPENDFSYNC, Appendfsync))
    etcd = Etcd(NOT_CHOSEN, pick(Trait.ETCD_CLUSTER, lambda v: 2 if v == YES else 1))
    zookeeper = ZooKeeper(NOT_CHOSEN, pick(Trait.ZOOKEEPER_ENSEMBLE, lambda v: v == YES), NOT_CHOSEN)
    parts = {"postgres": postgres, "redis": redis, "redlock": redlock, "etcd": etcd, "zookeeper": zookeeper}
    return Stack(**{name: part if name in have else None for name, part in parts.items()})  # type: ignore[arg-type]


def from_query(query: str) -> tuple[tuple[str, ...], dict[Trait, str]] | None:
    """The panel's choice as the page's URL keeps it (with or without its '?'); None when it holds no stack.
    LabError naming the key for a service, trait or value this lab does not know."""
    pairs = parse_qsl(query.removeprefix("?"), keep_blank_values=True)
    given = dict(pairs)
    if SERVICES_KEY not in given:
        return None
    services = tuple(s for s in given.pop(SERVICES_KEY).split(",") if s)
    wrong = [s for s in services if s not in SERVICES]
    if wrong:
        raise LabError(f"{SERVICES_KEY}: no service {wrong[0]!r} (services: {', '.join(SERVICES)})")
    known = {t.value: t for t in TRAITS}
    values = {}
    for key, value in given.items():
        if key not in known:
            raise LabError(f"no trait {key!r} in a stack (traits: {', '.join(known)})")
        trait = known[key]
        if value not in trait.info.values:
            raise LabError(f"{key}: {value!r} is not one of {', '.join(trait.info.values)}")
        values[trait] = value
    return services, values


def to_query(services: Iterable[str], values: Mapping[Trait, str]) -> str:
    """The query the page writes for a choice: services in the stack file's order, then the traits in theirs."""
    have = set(services)
    pairs = [(SERVICES_KEY, ",".join(s for s in SERVICES if s in have))]
    pairs += [(t.value, values[t]) for t in TRAITS if t in values]
    return "?" + urlencode(pairs, safe=",")


@dataclass(frozen=True)
class NamedStack:
    """A stack report.html answers for by name: the services it runs and the traits it fixes, the rest unknown."""

    title: str
    services: tuple[str, ...]
    values: dict = field(default_factory=dict)  # Trait -> its value, as the panel's query keeps it
    says: str = ""  # what the stack is, in one line


# Every fault counted as possible: every lock service, every fact unknown (REPORT.md's decision).
EVERY_STACK = NamedStack("every stack", SERVICES, {}, "Every lock service run and every fact unknown: every fault is "
                         "counted as possible, as REPORT.md decides.")
_PG_PLAIN = {Trait.POOLER: "none", Trait.REPLICATION: "none", Trait.HA_MANAGER: "none"}
# The stacks report.html answers for, in the order its choice lists them: the shapes a team most often runs, each
# one trait away from the next where it can be, so the page shows what that one trait changes.
PANEL_STACKS = (
    NamedStack("PostgreSQL alone, no idle guards", ("postgres",),
               {**_PG_PLAIN, Trait.IDLE_IN_TRANSACTION_GUARD: OFF, Trait.IDLE_SESSION_GUARD: OFF},
               "One PostgreSQL, no pooler, no standby, neither idle guard set."),
    NamedStack("PostgreSQL alone, a DBA's idle guards on", ("postgres",),
               {**_PG_PLAIN, Trait.IDLE_IN_TRANSACTION_GUARD: ON, Trait.IDLE_SESSION_GUARD: ON},
               "One PostgreSQL with idle_in_transaction_session_timeout and idle_session_timeout set."),
    NamedStack("PostgreSQL behind PgBouncer, transaction pooling", ("postgres",),
               {Trait.POOLER: "transaction", Trait.REPLICATION: "none", Trait.HA_MANAGER: "none"},
               "Every session of the job through a transaction-pooling PgBouncer."),
    NamedStack("PostgreSQL with an async standby under Patroni", ("postgres",),
               {Trait.POOLER: "none", Trait.REPLICATION: "async", Trait.HA_MANAGER: "patroni",
                Trait.SYNCHRONOUS_MODE: OFF},
               "A primary and an asynchronous standby, failed over by Patroni."),
    NamedStack("PostgreSQL with a sync standby under Patroni (synchronous_mode)", ("postgres",),
               {Trait.POOLER: "none", Trait.REPLICATION: "sync", Trait.HA_MANAGER: "patroni",
                Trait.SYNCHRONOUS_MODE: ON},
               "The same with synchronous_mode on."),
    NamedStack("PostgreSQL and one Redis, no AOF", ("postgres", "redis"),
               {**_PG_PLAIN, Trait.REDIS_APPENDFSYNC: "off", Trait.REDIS_REPLICAS: NO, Trait.REDIS_SENTINEL: NO},
               "PostgreSQL alone, and one Redis with no append-only file, no replica."),
    NamedStack("PostgreSQL and one Redis, appendfsync always", ("postgres", "redis"),
               {**_PG_PLAIN, Trait.REDIS_APPENDFSYNC: "always", Trait.REDIS_REPLICAS: NO, Trait.REDIS_SENTINEL: NO},
               "The same Redis with every write fsynced before it answers."),
    NamedStack("PostgreSQL and Redis with a replica under Sentinel", ("postgres", "redis"),
               {**_PG_PLAIN, Trait.REDIS_REPLICAS: YES, Trait.REDIS_SENTINEL: YES},
               "A Redis primary, a replica, and Sentinel to fail over between them."),
    NamedStack("PostgreSQL and an etcd cluster", ("postgres", "etcd"), {**_PG_PLAIN, Trait.ETCD_CLUSTER: YES},
               "PostgreSQL alone and an etcd cluster of several members."),
    NamedStack("PostgreSQL and a ZooKeeper ensemble", ("postgres", "zookeeper"),
               {**_PG_PLAIN, Trait.ZOOKEEPER_ENSEMBLE: YES},
               "PostgreSQL alone and a ZooKeeper ensemble of several servers."),
    NamedStack("PostgreSQL and Redlock over Redis masters, appendfsync always", ("postgres", "redlock"),
               {**_PG_PLAIN, Trait.REDLOCK_APPENDFSYNC: "always"},
               "PostgreSQL alone and Redlock's independent Redis masters, each fsyncing every write."),
)

__all__ = ["SERVICES", "stack_of", "from_query", "to_query", "NamedStack", "EVERY_STACK", "PANEL_STACKS"]
