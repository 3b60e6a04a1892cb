"""The values the scanner's interpreter computes with: what a Python expression may hold, as far as the code shows.

Each is a frozen, hashable value. A value the code does not determine is `Unknown`, with why (and, where a test has
decided it, whether it is truthy). A string partly known is a `Text` of templates whose holes are None. A database
object (connection, engine, cursor) is a value with an identity; what it is doing (its transaction, its lock) lives in
the path's State (lab/scan/state.py), keyed by that identity, so two names for one connection see the same facts.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, dataclass_transform

from lab.scan.findings import Driver, Site

MAX_OPTIONS = 12  # a union wider than this is Unknown: the code builds too many values to follow each


class Value:
    """Base of every abstract value."""


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def _hash_once(cls):
    """A frozen dataclass whose hash is computed once: values nest deeply, and paths are joined by hashing them."""
    cls = dataclass(frozen=True)(cls)
    computed = cls.__hash__

    def __hash__(self) -> int:
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = computed(self)
            object.__setattr__(self, "_hash", value)
            return value

    cls.__hash__ = __hash__
    return cls


@_hash_once
class Unknown(Value):
    why: str
    truth: bool | None = None  # decided by a test on this path: True (truthy), False (falsy), None (either)


@_hash_once
class Const(Value):
    value: Any  # None, bool, int, float, str, bytes, or a tuple of these


@_hash_once
class Text(Value):
    """A string known in part: each template is known text and holes (None); several templates: one of them."""

    templates: frozenset[tuple[str | None, ...]]


@_hash_once
class Seq(Value):
    kind: str  # "tuple", "list", "set"
    items: tuple[Value, ...]


@_hash_once
class Dict(Value):
    items: tuple[tuple[Value, Value], ...]  # keys as evaluated; a lookup matches Const keys only
    complete: bool = True  # False: built with ** of something unknown, so a key may be missing from `items`


@_hash_once
class Union(Value):
    """One of several values: the code chose between them in a way this path does not decide."""

    options: frozenset[Value]


@dataclass(frozen=True, eq=False)
class Module(Value):
    """A module of source the scanner reads (its globals are evaluated once, lazily)."""

    name: str
    path: str

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Module) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("module", self.name))


@_hash_once
class Func(Value):
    """A function the scanner can follow: its node, the module it is in, and what it closes over."""

    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda = field(compare=False)
    module: Module
    qualname: str
    owner: Class | None = None  # the class whose body defined it (for super())
    closure: tuple[tuple[str, Value], ...] = ()
    kind: str = "function"  # "function", "staticmethod", "classmethod", "property", "contextmanager"
    node_id: int = 0  # id(node): the identity compared, since nodes compare by identity anyway
    abstract: bool = False  # @abstractmethod: a class that leaves it so is judged through its subclasses

    @property
    def is_async(self) -> bool:
        return isinstance(self.node, ast.AsyncFunctionDef)


@_hash_once
class Class(Value):
    node: ast.ClassDef = field(compare=False)
    module: Module
    qualname: str
    node_id: int = 0


@_hash_once
class Bound(Value):
    """A function bound to its first argument (a method of an instance, or a classmethod of its class)."""

    func: Func
    receiver: Value


@_hash_once
class Super(Value):
    """super() inside a method of `owner`, for `receiver`."""

    owner: Class
    receiver: Value


@_hash_once
class Instance(Value):
    """An object of a class the scanner follows; its attributes live in the path's State."""

    cls: Class
    made_at: Site


@_hash_once
class Model(Value):
    """A name of a module the scanner does not read: a database client it models (psycopg2.connect,
    sqlalchemy.text), the standard library, or an installed library it leaves opaque (unread)."""

    name: str  # dotted: "psycopg2.connect", "sqlalchemy.text", "django.db.transaction.atomic"
    unread: bool = False  # a library that asks for no PostgreSQL client: its calls are the code moving on


@_hash_once
class Member(Value):
    """`receiver.name` for an object the interpreter does not own (a connection, a constant, an unknown value): what
    calling it does is decided by the receiver's kind (lab/scan/apis.py, lab/scan/stdlib.py)."""

    receiver: Value
    name: str


@_hash_once
class Rows(Value):
    """What a statement returned: an unlock's Answer, or rows nobody needs to follow."""

    answer: Value


@_hash_once
class Factory(Value):
    """Something that hands out connections: a Session factory (sessionmaker) bound to an engine, or a pool."""

    driver: Driver
    bind: Value | None = None  # a sessionmaker's engine


@_hash_once
class Future(Value):
    """asyncio.run_coroutine_threadsafe(...): its result() is the coroutine's result."""

    result: Value


@_hash_once
class Loaded(Value):
    """A plugin manager (stevedore's DriverManager): its `driver` is what it loaded."""

    driver: Value


class Marker(Enum):
    """A modelled value with nothing in it but what it is."""

    PASS_THROUGH = "a decorator that returns the function it is given (functools.wraps, lru_cache, a retry)"
    SUPPRESS = "contextlib.suppress(...): swallows what it names"


@_hash_once
class Marked(Value):
    marker: Marker


@_hash_once
class Param(Value):
    """A parameter of the function the scanner started from: nothing is known of it, but it is one object."""

    owner: str  # the function's qualified name
    path: str  # "conn", "self.ctx" ... (attributes read off it extend the path)
    truth: bool | None = None  # decided by a test on this path, as Unknown's


@_hash_once
class Conn(Value):
    """A database connection (or Session), identified by where it was made; its facts are in the State."""

    key: tuple  # identity: (made_at, driver) or ("django", alias) or ("param", ...) for one the code was handed
    driver: Driver
    made_at: Site | None
    library: str | None = None  # the installed distribution whose code made it, if any
    dialect: str | None = None


@_hash_once
class Engine(Value):
    """A SQLAlchemy Engine: connections it gives inherit its isolation level."""

    made_at: Site
    driver: Driver
    autocommit: bool | None  # None: the code does not show it
    why: str
    dialect: str | None = None
    guard_off: bool = False


@_hash_once
class Cursor(Value):
    conn: Conn
    made_at: Site


@_hash_once
class SqlText(Value):
    """sqlalchemy.text(...) of a statement."""

    text: Value


@_hash_once
class Answer(Value):
    """What pg_advisory_unlock returned (or a value computed from it): reading it in a test checks the release."""

    keys: frozenset[tuple]


@_hash_once
class Awaitable(Value):
    """A coroutine or awaitable whose result is `inner` (the scanner runs its code when it is made)."""

    inner: Value


@_hash_once
class Block(Value):
    """A context manager that opens a transaction on a connection and commits it at its end."""

    conn: Conn
    opened_by: str  # "conn.begin()", "transaction.atomic()", "with conn" ...
    gives: Value | None = None  # what `as` binds: the connection, or None for itself


@_hash_once
class Generator(Value):
    """A call of a @contextmanager function, not yet entered."""

    func: Func
    args: tuple[Value, ...]
    kwargs: tuple[tuple[str, Value], ...]


def options(value: Value) -> tuple[Value, ...]:
    """The possible values: a Union's options, or the value itself."""
    return tuple(value.options) if isinstance(value, Union) else (value,)


def union(values: list[Value] | tuple[Value, ...]) -> Value:
    """One value standing for any of several (flattened, duplicates dropped; Unknown when too many)."""
    first = values[0] if values else None
    if first is not None and all(v is first for v in values):
        return first
    found: dict[Value, None] = {}
    for value in values:
        for option in options(value):
            found[option] = None
    flat = list(found)
    if len(flat) == 1:
        return flat[0]
    if len(flat) > MAX_OPTIONS:
        return Unknown("the code builds more values here than the scanner follows one by one")
    return Union(frozenset(flat))


def truth(value: Value) -> bool | None:
    """Whether a value is truthy: True, False, or None when the code does not decide it."""
    found: set[bool | None] = set()
    for option in options(value):
        if isinstance(option, Const):
            found.add(bool(option.value))
        elif isinstance(option, (Unknown, Param)):
            found.add(option.truth)
        elif isinstance(option, (Text, Answer, Member)):
            found.add(None)
        elif isinstance(option, Seq):
            found.add(bool(option.items))
        elif isinstance(option, Dict):
            found.add(bool(option.items) if option.complete and not option.items else (True if option.items else None))
        else:
            found.add(True)  # an object, a function, a class, a connection: truthy
    return found.pop() if len(found) == 1 else None


def text_templates(value: Value) -> frozenset[tuple[str | None, ...]] | None:
    """The templates of a string value (a Const string is one template with no hole); None for a non-string."""
    found: set[tuple[str | None, ...]] = set()
    for option in options(value):
        if isinstance(option, SqlText):
            inner = text_templates(option.text)
            if inner is None:
                return None
            found |= inner
        elif isinstance(option, Const) and isinstance(option.value, (str, bytes)):
            text = option.value.decode(errors="replace") if isinstance(option.value, bytes) else option.value
            found.add((text,))
        elif isinstance(option, Text):
            found |= option.templates
        elif isinstance(option, (Unknown, Param)):
            found.add((None,))
        else:
            return None
    return frozenset(found)


def concat(parts: list[Value]) -> Value:
    """The string of several parts joined: templates multiplied out (holes kept), or one hole when too many."""
    results: list[tuple[str | None, ...]] = [()]
    for part in parts:
        templates = text_templates(part)
        if templates is None:
            templates = frozenset({(None,)})
        results = [r + t for r in results for t in templates]
        if len(results) > MAX_OPTIONS:
            return Text(frozenset({(None,)}))
    cleaned = frozenset(_squash(r) for r in results)
    if len(cleaned) == 1:
        only = next(iter(cleaned))
        if all(p is not None for p in only):
            return Const("".join(p for p in only if p is not None))
    return Text(cleaned)


def _squash(parts: tuple[str | None, ...]) -> tuple[str | None, ...]:
    """Adjacent known parts joined, adjacent holes one hole."""
    out: list[str | None] = []
    for part in parts:
        if part is None:
            if not out or out[-1] is not None:
                out.append(None)
        elif out and (last := out[-1]) is not None:
            out[-1] = last + part
        else:
            out.append(part)
    return tuple(out) or ("",)


def answers_in(value: Value) -> frozenset[tuple]:
    """The unlock answers a value carries (in a Union, a sequence, or itself)."""
    keys: set[tuple] = set()
    for option in options(value):
        if isinstance(option, Answer):
            keys |= option.keys
        elif isinstance(option, Seq):
            for item in option.items:
                keys |= answers_in(item)
        elif isinstance(option, Awaitable):
            keys |= answers_in(option.inner)
        elif isinstance(option, Rows):
            keys |= answers_in(option.answer)
    return frozenset(keys)
