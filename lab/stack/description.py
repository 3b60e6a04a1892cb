"""A stack description: what one deployment runs (PostgreSQL and its pooler, replication and HA manager; Redis; etcd;
ZooKeeper; the client; the lock in use), as one small typed document with a schema version.

`lab doctor` writes it from what it can read and a user may edit it; `lab report --stack` reads it to answer for
that stack (lab/report/advice.py). Every fact may be unknown, and an unknown is a value of its own (`Unknown`,
with what would tell it), never a guess: the advice then counts a fault as possible and says which fact decides.
A part that is None is not in the stack (no Redis, no HA manager).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Union

from lab.errors import LabError

SCHEMA = 1


@dataclass(frozen=True)
class Unknown:
    """A fact nobody could read, with what would tell it ('no --patroni-url given')."""

    why: str


class PoolMode(str, Enum):
    """What sits between the clients and PostgreSQL, as the doctor's two clients saw it."""

    NONE = "none"  # each connection is its own server session, nothing in between
    SESSION = "session"  # a pooler or proxy that gives each client a server session of its own
    TRANSACTION = "transaction"  # a pooler that hands server sessions out per transaction


class Replication(str, Enum):
    """PostgreSQL's standbys, as its primary reports them."""

    NONE = "none"  # no standby streams from it
    ASYNC = "async"  # standbys, and a commit waits for none of them
    SYNC = "sync"  # synchronous_standby_names is set: a commit waits for a standby


class Watchdog(str, Enum):
    """Patroni's watchdog mode (its local configuration, `watchdog.mode`)."""

    OFF = "off"
    AUTOMATIC = "automatic"  # used when the node has a watchdog device, else nothing
    REQUIRED = "required"  # the node never leads without a working watchdog


class Appendfsync(str, Enum):
    """How a Redis keeps its writes across a restart: no append-only file, or one fsynced as appendfsync says."""

    OFF = "off"  # appendonly no
    NO = "no"
    EVERYSEC = "everysec"
    ALWAYS = "always"


@dataclass(frozen=True)
class Guard:
    """One idle guard as a session of the doctor's database and role gets it, and where else it is set."""

    ms: int  # 0: off for such a session
    source: str  # pg_settings.source: default, configuration file, database, user, database user, ...
    # Settings per database or role (pg_db_role_setting) with a value other than 0 that may reach another role's
    # sessions of this database: "database app, role (every role): idle_in_transaction_session_timeout=5min".
    elsewhere: tuple[str, ...] = ()


@dataclass(frozen=True)
class Patroni:
    """The HA manager: Patroni, as its REST API reports it (GET /config, /patroni, /cluster)."""

    version: str | Unknown
    members: int | Unknown
    synchronous_mode: bool | Unknown
    synchronous_mode_strict: bool | Unknown
    failsafe_mode: bool | Unknown
    watchdog: Watchdog | Unknown
    ttl: int | Unknown
    loop_wait: int | Unknown
    retry_timeout: int | Unknown
    maximum_lag_on_failover: int | Unknown


@dataclass(frozen=True)
class Postgres:
    version: str | Unknown
    idle_in_transaction_session_timeout: Guard | Unknown
    idle_session_timeout: Guard | Unknown
    pooler: PoolMode | Unknown
    pooler_kind: str | None | Unknown  # what sits in between, in words; None: nothing
    replication: Replication | Unknown
    ha: Patroni | None | Unknown  # None: no HA manager


@dataclass(frozen=True)
class Sentinel:
    sentinels: int | Unknown
    quorum: int | Unknown
    service: str | Unknown


@dataclass(frozen=True)
class Redis:
    version: str | Unknown
    appendfsync: Appendfsync | Unknown
    rdb_snapshots: bool | Unknown  # `save` has save points
    replicas: int | Unknown
    min_replicas_to_write: int | Unknown
    sentinel: Sentinel | None | Unknown  # None: no Sentinel watches it


@dataclass(frozen=True)
class Redlock:
    """Independent Redis masters a Redlock lock asks a majority of."""

    masters: int
    appendfsync: Appendfsync | Unknown  # the least durable master's


@dataclass(frozen=True)
class Etcd:
    version: str | Unknown
    members: int | Unknown


@dataclass(frozen=True)
class ZooKeeper:
    version: str | Unknown
    ensemble: bool | Unknown  # several servers (a server's mode: leader or follower), or one (standalone)
    members: int | Unknown


@dataclass(frozen=True)
class Client:
    """The application's side: nothing a server can report, so given by the user."""

    driver: str | Unknown = Unknown("not readable from a server: give --driver or set it in the stack file")
    autocommit: bool | Unknown = Unknown("not readable from a server: give --autocommit or set it in the stack file")
    pool: str | Unknown = Unknown("not readable from a server: set it in the stack file")


LOCK_UNKNOWN = Unknown("not readable from a server: give --lock BACKEND (a name `lab list` shows) or set it in the "
                       "stack file")


@dataclass(frozen=True)
class Stack:
    postgres: Postgres | None = None
    redis: Redis | None = None
    redlock: Redlock | None = None
    etcd: Etcd | None = None
    zookeeper: ZooKeeper | None = None
    client: Client = field(default_factory=Client)
    lock: str | None | Unknown = LOCK_UNKNOWN  # the backend in use (a name `lab list` shows); None: no lock
    schema: int = SCHEMA

    def services(self) -> frozenset[str]:
        """The lock services this stack runs, by the names backends declare where they live (lab/declarations/where.py)."""
        parts = {"postgres": self.postgres, "redis": self.redis, "redlock": self.redlock, "etcd": self.etcd,
                 "zookeeper": self.zookeeper}
        return frozenset(name for name, part in parts.items() if part is not None)

    def facts(self) -> list[tuple[str, str]]:
        """(dotted field, value in words) for every fact, known or not, in document order: what the doctor prints."""
        return list(_facts(self, ""))

    def unknowns(self) -> list[tuple[str, str]]:
        """(dotted field, why) for every fact left unknown, in document order."""
        return list(_unknowns(self, ""))

    def to_json(self) -> dict:
        return typing.cast(dict, _encode(self))

    @classmethod
    def from_json(cls, data: object) -> Stack:
        """The document as a Stack; LabError naming the field for anything it cannot be."""
        if not isinstance(data, dict):
            raise LabError("a stack description is a JSON object")
        schema = data.get("schema")
        if schema != SCHEMA:
            raise LabError(f"a stack description of schema {schema!r}: this lab reads schema {SCHEMA}")
        return typing.cast(Stack, _decode(Stack, data, "stack"))

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, path: Path) -> Stack:
        try:
            text = path.read_text()
        except OSError as exc:
            raise LabError(f"cannot read the stack description {path}: {exc.strerror}") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise LabError(f"the stack description {path} is not JSON: {exc}") from None
        return cls.from_json(data)


# --- the document's encoding ------------------------------------------------------------------------------------
# Known facts are plain JSON values; an unknown one is {"unknown": why}; an absent part is null.

def _encode(value: Any) -> Any:
    if isinstance(value, Unknown):
        return {"unknown": value.why}
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


def _decode(kind: Any, value: Any, where: str) -> Any:
    """`value` read as the type `kind`; LabError naming `where` when it cannot be."""
    if typing.get_origin(kind) in (Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        if isinstance(value, dict) and set(value) == {"unknown"} and Unknown in options:
            return Unknown(str(value["unknown"]))
        errors = []
        for option in options:
            if option in (Unknown, type(None)):
                continue
            try:
                return _decode(option, value, where)
            except LabError as exc:
                errors.append(str(exc))
        raise LabError(errors[0] if errors else f"{where}: {value!r} is not allowed here")
    if typing.get_origin(kind) is tuple:
        if not isinstance(value, list):
            raise LabError(f"{where}: expected a list, got {value!r}")
        (item,) = typing.get_args(kind)[:1]
        return tuple(_decode(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(value)
        except ValueError:
            raise LabError(f"{where}: {value!r} is not one of {', '.join(m.value for m in kind)}") from None
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise LabError(f"{where}: expected an object, got {value!r}")
        hints = typing.get_type_hints(kind)
        names = {f.name for f in dataclasses.fields(kind)}
        extra = sorted(set(value) - names)
        if extra:
            raise LabError(f"{where}: no field {extra[0]!r} (fields: {', '.join(sorted(names))})")
        given = {}
        for f in dataclasses.fields(kind):
            if f.name in value:
                given[f.name] = _decode(hints[f.name], value[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise LabError(f"{where}: missing field {f.name!r} (write {{\"unknown\": \"why\"}} for a fact not known)")
        return typing.cast(Any, kind)(**given)
    if kind is bool:
        if not isinstance(value, bool):
            raise LabError(f"{where}: expected true or false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise LabError(f"{where}: expected a whole number, got {value!r}")
        return value
    if kind is str:
        if not isinstance(value, str):
            raise LabError(f"{where}: expected a string, got {value!r}")
        return value
    raise LabError(f"{where}: cannot read a {kind!r}")  # a field type this codec was not taught


def _unknowns(value: Any, path: str):
    if isinstance(value, Unknown):
        yield path, value.why
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _unknowns(getattr(value, f.name), f"{path}.{f.name}" if path else f.name)


def _facts(value: Any, path: str):
    if isinstance(value, Unknown):
        yield path, f"unknown ({value.why})"
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if f.name != "schema":
                yield from _facts(getattr(value, f.name), f"{path}.{f.name}" if path else f.name)
    elif value is None:
        yield path, "none"
    elif isinstance(value, tuple):
        yield path, "; ".join(map(str, value)) or "-"
    elif isinstance(value, bool):
        yield path, "true" if value else "false"
    else:
        yield path, str(value.value if isinstance(value, Enum) else value)
