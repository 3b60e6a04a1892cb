"""Which faults can happen to a stack: the stack traits a fault column's fault depends on, as typed data.

A fault column (lab/declarations/columns.py) declares `happens_when`: conditions on traits of a stack (lab/stack/description.py), each
naming a trait and the values under which the fault can happen (transaction pooling only behind a transaction
pooler; Patroni's split brain only under Patroni). Each trait belongs to one service; a condition counts for a lock
only when that service holds its lock, fence or writes (lab/declarations/where.py), so "lock server restarted" can depend on
Redis' appendfsync for a Redis lock and on nothing for a PostgreSQL one. A trait the stack leaves unknown makes
the answer unknown, which the advice counts as possible and names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Callable

from lab.stack.description import Guard, Patroni, Stack, Unknown, Watchdog

ON, OFF = "on", "off"  # a setting
YES, NO = "yes", "no"  # a part the stack has or not


@dataclass(frozen=True)
class Setting:
    """How an operator gives a trait a value, to avoid a fault (the advice's fixes)."""

    how: str
    # Other traits the same change sets: Patroni's synchronous_mode makes its replication synchronous.
    also: tuple[tuple[Trait, str], ...] = ()
    # A stack this way is not for: Patroni rewrites synchronous_standby_names, so there it is synchronous_mode.
    unless: tuple[Trait, str] | None = None


@dataclass(frozen=True)
class TraitInfo:
    service: str  # the lock service it belongs to (lab/declarations/where.py's names)
    says: dict[str, str]  # each value it takes -> the words for a stack with it ("Redis has replicas")
    settable: dict[str, Setting] = field(default_factory=dict)  # value -> how an operator sets it
    # A trait of a part that exists only where another trait has a value (Patroni's settings, under Patroni): where
    # it has another, this one reads as absent (no condition on it holds); where that one is unknown, so is this.
    within: tuple[Trait, str] | None = None

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(self.says)


class Trait(str, Enum):
    """One property of a stack a fault may depend on, named by its place in the stack file; `.info` says its
    service, its values and their words."""

    POOLER = "postgres.pooler"
    REPLICATION = "postgres.replication"
    HA_MANAGER = "postgres.ha"
    SYNCHRONOUS_MODE = "postgres.ha.synchronous_mode"
    FAILSAFE_MODE = "postgres.ha.failsafe_mode"
    WATCHDOG = "postgres.ha.watchdog"
    IDLE_IN_TRANSACTION_GUARD = "postgres.idle_in_transaction_session_timeout"
    IDLE_SESSION_GUARD = "postgres.idle_session_timeout"
    REDIS_APPENDFSYNC = "redis.appendfsync"
    REDIS_REPLICAS = "redis.replicas"
    REDIS_SENTINEL = "redis.sentinel"
    REDIS_MIN_REPLICAS_TO_WRITE = "redis.min_replicas_to_write"
    REDLOCK_APPENDFSYNC = "redlock.appendfsync"
    ETCD_CLUSTER = "etcd.members"
    ZOOKEEPER_ENSEMBLE = "zookeeper.ensemble"

    @property
    def info(self) -> TraitInfo:
        return TRAITS[self]


def _fsync(who: str) -> dict[str, str]:
    return {"off": f"{who} without an append-only file", "no": f"{who} with appendfsync no",
            "everysec": f"{who} with appendfsync everysec", "always": f"{who} with appendfsync always"}


UNDER_PATRONI = (Trait.HA_MANAGER, "patroni")  # Patroni's own settings: read from its part of the stack

TRAITS: dict[Trait, TraitInfo] = {
    Trait.POOLER: TraitInfo("postgres", {"none": "clients connected straight to PostgreSQL",
                                         "session": "a session pooler or proxy in front of PostgreSQL",
                                         "transaction": "a transaction-pooling PgBouncer (or alike) in front"},
                            {"session": Setting("pool_mode = session in the pooler (or the lock's connection past "
                                                "it)")}),
    Trait.REPLICATION: TraitInfo("postgres", {"none": "no standby", "async": "asynchronous standbys",
                                              "sync": "a synchronous standby"},
                                 {"sync": Setting("synchronous replication (synchronous_standby_names)",
                                                  unless=(Trait.HA_MANAGER, "patroni"))}),
    Trait.HA_MANAGER: TraitInfo("postgres", {"none": "no HA manager", "patroni": "Patroni managing PostgreSQL"}),
    Trait.SYNCHRONOUS_MODE: TraitInfo("postgres", {ON: "Patroni's synchronous_mode on",
                                                   OFF: "Patroni's synchronous_mode off"},
                                      {ON: Setting("synchronous_mode: true (patronictl edit-config)",
                                                   also=((Trait.REPLICATION, "sync"),))}, UNDER_PATRONI),
    Trait.FAILSAFE_MODE: TraitInfo("postgres", {ON: "Patroni's failsafe_mode on", OFF: "Patroni's failsafe_mode off"},
                                   {ON: Setting("failsafe_mode: true (patronictl edit-config)")}, UNDER_PATRONI),
    Trait.WATCHDOG: TraitInfo("postgres", {ON: "a watchdog fencing a stopped Patroni agent",
                                           OFF: "no watchdog fencing a stopped Patroni agent"},
                              {ON: Setting("watchdog: mode: required in every node's patroni.yml, with a watchdog "
                                           "device")}, UNDER_PATRONI),
    Trait.IDLE_IN_TRANSACTION_GUARD: TraitInfo("postgres", {ON: "idle_in_transaction_session_timeout set",
                                                            OFF: "idle_in_transaction_session_timeout 0"}),
    Trait.IDLE_SESSION_GUARD: TraitInfo("postgres", {ON: "idle_session_timeout set", OFF: "idle_session_timeout 0"}),
    Trait.REDIS_APPENDFSYNC: TraitInfo("redis", _fsync("Redis"),
                                       {"always": Setting("appendonly yes, appendfsync always")}),
    Trait.REDIS_REPLICAS: TraitInfo("redis", {YES: "Redis with replicas", NO: "Redis without a replica"}),
    Trait.REDIS_SENTINEL: TraitInfo("redis", {YES: "Sentinel watching Redis", NO: "no Sentinel"}),
    Trait.REDIS_MIN_REPLICAS_TO_WRITE: TraitInfo("redis", {ON: "min-replicas-to-write 1 or more",
                                                           OFF: "min-replicas-to-write 0"},
                                                 {ON: Setting("min-replicas-to-write 1 and min-replicas-max-lag "
                                                              "on every server")}),
    Trait.REDLOCK_APPENDFSYNC: TraitInfo("redlock", _fsync("Redlock masters"),
                                         {"always": Setting("appendonly yes, appendfsync always on every "
                                                            "master")}),
    Trait.ETCD_CLUSTER: TraitInfo("etcd", {YES: "an etcd cluster of several members", NO: "a single etcd member"}),
    Trait.ZOOKEEPER_ENSEMBLE: TraitInfo("zookeeper", {YES: "a ZooKeeper ensemble of several servers",
                                                      NO: "a single ZooKeeper server"}),
}


@dataclass(frozen=True)
class When:
    """A fault can happen only where `trait` has one of `any_of`."""

    trait: Trait
    any_of: tuple[str, ...]

    def __post_init__(self) -> None:
        wrong = [v for v in self.any_of if v not in self.trait.info.values]
        if wrong or not self.any_of:
            raise ValueError(f"{self.trait.value} takes {', '.join(self.trait.info.values)}, not {wrong or 'nothing'}")

    def words(self) -> str:
        """'a transaction-pooling PgBouncer (or alike) in front', 'Redis without an append-only file or Redis with
        appendfsync no'."""
        return " or ".join(self.trait.info.says[v] for v in self.any_of)

    def to_json(self) -> dict:
        return {"trait": self.trait.value, "any_of": list(self.any_of)}

    @classmethod
    def from_json(cls, data: dict) -> When:
        return cls(Trait(data["trait"]), tuple(data["any_of"]))


def when(trait: Trait, *values: str) -> When:
    return When(trait, tuple(values))


def conditions_to_json(conditions: tuple[When, ...] | None) -> list | None:
    return None if conditions is None else [c.to_json() for c in conditions]


def conditions_from_json(data: list | None) -> tuple[When, ...] | None:
    return None if data is None else tuple(When.from_json(c) for c in data)


# --- reading a trait off a stack --------------------------------------------------------------------------------
# A reader returns the trait's value, an Unknown, or None when the part it belongs to is not in the stack (no Redis,
# no Patroni): then no condition on it holds.

Reading = str | Unknown | None


def _switch(value: bool | Unknown) -> Reading:
    return value if isinstance(value, Unknown) else (ON if value else OFF)


def _yes(value: bool | Unknown) -> Reading:
    return value if isinstance(value, Unknown) else (YES if value else NO)


def _some(value: int | Unknown, yes: str = YES, no: str = NO) -> Reading:
    return value if isinstance(value, Unknown) else (yes if value > 0 else no)


def _several(value: int | Unknown) -> Reading:
    return value if isinstance(value, Unknown) else (YES if value > 1 else NO)


def _guard(value: Guard | Unknown) -> Reading:
    if isinstance(value, Unknown):
        return value
    if value.ms > 0:
        return ON
    if value.elsewhere:
        return Unknown(f"off for the doctor's session, but set per database or role ({'; '.join(value.elsewhere)}): "
                       "on for sessions of that role")
    return OFF


def _patroni(stack: Stack) -> Patroni | Unknown | None:
    return None if stack.postgres is None else stack.postgres.ha


def _ha_manager(stack: Stack) -> Reading:
    ha = _patroni(stack)
    if stack.postgres is None:
        return None
    return ha if isinstance(ha, Unknown) else ("none" if ha is None else "patroni")


def _on_patroni(read: Callable[[Patroni], Reading]) -> Callable[[Stack], Reading]:
    def reader(stack: Stack) -> Reading:
        ha = _patroni(stack)
        if ha is None:
            return None
        return ha if isinstance(ha, Unknown) else read(ha)
    return reader


def _watchdog(ha: Patroni) -> Reading:
    if isinstance(ha.watchdog, Unknown):
        return ha.watchdog
    if ha.watchdog is Watchdog.AUTOMATIC:
        return Unknown("watchdog mode automatic: on only where the node has a watchdog device")
    return ON if ha.watchdog is Watchdog.REQUIRED else OFF


def _sentinel(stack: Stack) -> Reading:
    if stack.redis is None:
        return None
    sentinel = stack.redis.sentinel
    return sentinel if isinstance(sentinel, Unknown) else (NO if sentinel is None else YES)


def _enum_value(value) -> Reading:
    return value if isinstance(value, Unknown) else value.value


READERS: dict[Trait, Callable[[Stack], Reading]] = {
    Trait.POOLER: lambda s: None if s.postgres is None else _enum_value(s.postgres.pooler),
    Trait.REPLICATION: lambda s: None if s.postgres is None else _enum_value(s.postgres.replication),
    Trait.HA_MANAGER: _ha_manager,
    Trait.SYNCHRONOUS_MODE: _on_patroni(lambda ha: _switch(ha.synchronous_mode)),
    Trait.FAILSAFE_MODE: _on_patroni(lambda ha: _switch(ha.failsafe_mode)),
    Trait.WATCHDOG: _on_patroni(_watchdog),
    Trait.IDLE_IN_TRANSACTION_GUARD:
        lambda s: None if s.postgres is None else _guard(s.postgres.idle_in_transaction_session_timeout),
    Trait.IDLE_SESSION_GUARD: lambda s: None if s.postgres is None else _guard(s.postgres.idle_session_timeout),
    Trait.REDIS_APPENDFSYNC: lambda s: None if s.redis is None else _enum_value(s.redis.appendfsync),
    Trait.REDIS_REPLICAS: lambda s: None if s.redis is None else _some(s.redis.replicas),
    Trait.REDIS_SENTINEL: _sentinel,
    Trait.REDIS_MIN_REPLICAS_TO_WRITE: lambda s: None if s.redis is None else _some(s.redis.min_replicas_to_write, ON, OFF),
    Trait.REDLOCK_APPENDFSYNC: lambda s: None if s.redlock is None else _enum_value(s.redlock.appendfsync),
    Trait.ETCD_CLUSTER: lambda s: None if s.etcd is None else _several(s.etcd.members),
    Trait.ZOOKEEPER_ENSEMBLE: lambda s: None if s.zookeeper is None else _yes(s.zookeeper.ensemble),
}


def read_trait(stack: Stack, trait: Trait, changed: dict[Trait, str] | None = None) -> Reading:
    """The trait's value on this stack (or as `changed` sets it: a setting the advice tries)."""
    if changed and trait in changed:
        return changed[trait]
    return READERS[trait](stack)


# --- whether a fault can happen ---------------------------------------------------------------------------------

class Happens(str, Enum):
    YES = "yes"
    UNKNOWN = "unknown"  # a trait it depends on is unknown: it may
    NO = "no"


@dataclass(frozen=True)
class Answer:
    """Whether a column's fault can happen to a lock on a stack, and what decided it."""

    happens: Happens
    unknown: tuple[tuple[When, str], ...] = ()  # the conditions left open, each with why its trait is unknown
    ruled_out_by: tuple[str, ...] = ()  # why not, in words: the conditions unmet, or the services it cannot strike
    declared: bool = True  # False: nothing was declared, so it is taken to happen to every stack


def happens(conditions: tuple[When, ...] | None, stack: Stack, services: frozenset[str],
            changed: dict[Trait, str] | None = None, strikes: tuple[str, ...] | None = None) -> Answer:
    """Whether a fault can happen to a lock whose lock, fence and writes live on `services`: only when it strikes
    one of them (strikes None: whichever holds the lock), and every condition on one of those services holds.

    conditions None: a run recorded before columns declared them, and no declaration of this lab's for it; then
    every stack."""
    if conditions is None:
        return Answer(Happens.YES, declared=False)
    if strikes is not None and not set(strikes) & services:
        return Answer(Happens.NO, ruled_out_by=(f"it strikes only {' or '.join(strikes)}",))
    unknown, out = [], []
    for condition in conditions:
        service = condition.trait.info.service
        if service not in services:
            continue
        if service not in stack.services():  # the lock uses a service the description leaves out
            unknown.append((condition, f"the stack does not describe its {service}"))
            continue
        value = read_trait(stack, condition.trait, changed)
        if isinstance(value, Unknown):
            unknown.append((condition, value.why))
        elif value is None or value not in condition.any_of:
            out.append(f"needs {condition.words()}")
    if out:
        return Answer(Happens.NO, ruled_out_by=tuple(out))
    return Answer(Happens.UNKNOWN if unknown else Happens.YES, unknown=tuple(unknown))
