"""A stack as report.html's stack panel chooses it: the services it runs and a value (or unknown) for each trait
lab/exposure.py declares, kept in the page's URL as a query (`?stack=postgres,redis&postgres.pooler=transaction`).

`stack_of` builds the Stack (lab/stack.py) whose traits read exactly as chosen, so the advice in Python
(lab/report/advice.py) answers for the same stack the page's script does; tests/fast/test_stack_choices.py holds
the two to each other. A fact no trait decides is left unknown; where the panel says only on or off, the stack gets
the smallest figure that reads so (a guard of 1 ms, one replica, two etcd members).
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, TypeVar
from urllib.parse import parse_qsl, urlencode

from lab.errors import LabError
from lab.exposure import OFF, ON, TRAITS, YES, Trait
from lab.stack import (Appendfsync, Etcd, Guard, Patroni, PoolMode, Postgres, Redis, Redlock, Replication, Sentinel,
                       Stack, Unknown, Watchdog, ZooKeeper)

# The lock services a stack may describe, in the stack file's order: each trait belongs to one (lab/exposure.py).
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


__all__ = ["SERVICES", "stack_of", "from_query", "to_query"]
