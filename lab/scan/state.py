"""What one path through the code knows at one point: its locals, the attributes of the objects it made, and what
each connection is doing (its transaction mode, an open transaction, a session lock held on it).

A connection's facts are a set: paths that were joined keep each one's facts, so a lock held in an open transaction
on any of them is still seen. The interpreter copies a State when it changes it (paths fork at every undecided
test), so a State is never changed in place once another path may hold it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Hashable

from lab.scan.findings import Connection, Site, TxMode
from lab.scan.values import Value, union


@dataclass(frozen=True)
class LockRef:
    """A session lock taken: where (the line in the scanned code, then the calls down to the statement), which call,
    and the connection as it was when the lock was taken."""

    chain: tuple[Site, ...]
    call: str
    connection: Connection
    library: str | None


@dataclass(frozen=True)
class ConnFact:
    """One possibility for what a connection is doing."""

    mode: TxMode
    why: str  # where the mode comes from
    open: Site | None = None  # the statement that opened the transaction now open, or None (idle)
    lock: LockRef | None = None  # a session lock held on it
    reopened: bool = False  # the open transaction was opened after a commit, while the lock was held (case D)
    guard_off: bool = False  # idle_in_transaction_session_timeout is 0 for this session
    closed: bool = False
    blocks: int = 0  # explicit transaction blocks open around the code now (with conn.begin(), atomic())
    notices: bool = False  # a notice handler is on: PostgreSQL's WARNING for a false unlock is heard


def fresh(mode: TxMode, why: str) -> frozenset[ConnFact]:
    return frozenset({ConnFact(mode, why)})


class State:
    """One path's knowledge. Changing methods return a new State."""

    __slots__ = ("locals", "heap", "conns", "pending")

    def __init__(self, locals_: dict[str, Value] | None = None, heap: dict[tuple[Value, str], Value] | None = None,
                 conns: dict[Hashable, frozenset[ConnFact]] | None = None,
                 pending: frozenset[tuple] = frozenset()):
        self.locals = locals_ if locals_ is not None else {}
        self.heap = heap if heap is not None else {}
        self.conns = conns if conns is not None else {}
        self.pending = pending  # unlock answers not read yet: (chain, conn key)

    def with_locals(self, locals_: dict[str, Value]) -> State:
        return State(locals_, self.heap, self.conns, self.pending)

    def set_local(self, name: str, value: Value) -> State:
        return State({**self.locals, name: value}, self.heap, self.conns, self.pending)

    def set_attr(self, obj: Value, name: str, value: Value) -> State:
        return State(self.locals, {**self.heap, (obj, name): value}, self.conns, self.pending)

    def attr(self, obj: Value, name: str) -> Value | None:
        return self.heap.get((obj, name))

    def facts(self, key: Hashable) -> frozenset[ConnFact] | None:
        return self.conns.get(key)

    def set_facts(self, key: Hashable, facts: frozenset[ConnFact]) -> State:
        return State(self.locals, self.heap, {**self.conns, key: facts}, self.pending)

    def map_facts(self, key: Hashable, change) -> State:
        """Every possibility of a connection changed by `change(fact) -> fact`."""
        facts = self.conns.get(key)
        if facts is None:
            return self
        return self.set_facts(key, frozenset(change(f) for f in facts))

    def with_pending(self, pending: frozenset[tuple]) -> State:
        return State(self.locals, self.heap, self.conns, pending)


def _join_maps(maps: list[dict], combine) -> dict:
    """Several paths' maps as one: a key's entries combined unless every path holds the very same one."""
    first = maps[0]
    if all(m is first for m in maps):
        return first
    out = {}
    for key in dict.fromkeys(k for m in maps for k in m):
        found = [m[key] for m in maps if key in m]
        out[key] = found[0] if len(found) == len(maps) and all(f is found[0] for f in found) else combine(found)
    return out


def _pool(facts: list[frozenset[ConnFact]]) -> frozenset[ConnFact]:
    return frozenset().union(*facts)


def join(states: list[State]) -> State:
    """One state standing for several paths: values become unions, connection facts are pooled."""
    if len(states) == 1:
        return states[0]
    return State(_join_maps([s.locals for s in states], union), _join_maps([s.heap for s in states], union),
                 _join_maps([s.conns for s in states], _pool), frozenset().union(*(s.pending for s in states)))


def closed_fact(fact: ConnFact) -> ConnFact:
    """The connection was closed: its session ended, and its session lock with it."""
    return replace(fact, closed=True, open=None, lock=None, reopened=False)
