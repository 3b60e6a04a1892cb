"""Is a trial's history linearizable as a mutex? A bounded Wing–Gong search, in pure Python.

Knossos, Elle and Porcupine cannot be installed here, so the lab checks its one model itself. The
search is Wing and Gong's (1993) with Lowe's (2017) memo: keep the set of operations linearized so
far (a bitset) and the model's state, never visit the same pair twice, and stop with UNKNOWN at a
bound rather than run forever.

The model. The state is the holder (a process) or nobody. `acquire` by p is legal when nobody holds
and makes p the holder; `release` by p is legal when p holds and frees the lock. Every other `f`
(write, commit, observe, told, fault, heal, held, renew) is ignored. Only run-level rights are this
model's: an acquire (or release) whose invoke or completion carries scope "company" is a lock
inside a write, judged by its writes (judge.overlapping_writes), and is left out here; no scope
counts as "run".

Operations. Each invoke is paired with the next completion of the same (process, f):
- ok: it took effect at one instant between its invoke and its completion (it must be ordered);
- fail: it did not take effect, and is dropped;
- info, or an invoke never completed (a killed process, or one invoked again before completing):
  it may or may not have taken effect, at any instant after its invoke, with no upper bound, so the
  search may order it or leave it out (Jepsen's reading: even after its own process's next op, as a
  broken connection's command can reach the server after the new connection's);
- a completion with no invoke (the lab records some "ok acquire" alone) was invoked at its own time.

Leases. `expires_after=None` is the plain mutex: a lock lost to a timeout or a killed session while
its holder never released is not linearizable, which is the lab's "lost". With a TTL in seconds,
the lock is a lease: every acquire the search orders may be followed by an implicit expiry of that
hold at any instant at least `expires_after` after the acquire's *invoke* (the server granted it no
earlier, so its TTL cannot have run out earlier). Renewals are ignored, so the lease model is the
permissive one: it says a history is a lease behaving as a lease, never that a renewal was honoured.
Comparing the two answers tells a lease behaving as a lease from a mutex broken.

The answer. A history with no run-level acquire or release (its locks live inside the write, or it has
no lock) gives the search nothing to order: UNKNOWN, never "linearizable" by default. `order` names each ordered op by its completion's index in the history (its invoke's
when it never completed); expiries are no history op, so they are not in it (`detail` names them).
FALSE's detail is the deepest state the search could not leave: the op that had to come next by
real-time order, and the hold that forbade it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from lab.checkers.ops import F, Op, Type
from lab.checkers.verdict import Finding, Kind, Valid

CHECKER = "linearizable (mutex)"
NOTHING_TO_ORDER = "no run-level acquire or release to order"
FREE = -1  # the model's state when nobody holds the lock
NEVER = float("inf")  # the completion of an op that may take effect at any time after its invoke
_CLOCK_EVERY = 256  # states between looks at the clock


@dataclass(frozen=True)
class Linearization:
    """The search's answer: valid or not (or unknown at the bound), a legal order, its cost and why."""

    valid: Valid  # TRUE: a legal order exists; FALSE: none does; UNKNOWN: the bound was reached, or nothing to order
    order: tuple[int, ...]  # indices into the given history of the ops in a legal order (TRUE), else ()
    explored: int  # search states visited
    detail: str  # one line: why


@dataclass(frozen=True)
class MutexOp:
    """One acquire or release as the model sees it: who, what, and the window it took effect in.

    index is the history index that stands for it in an order: its completion, or its invoke when it
    never completed. low is its invoke time; high its completion for an ok op, NEVER otherwise.
    """

    index: int
    process: str
    f: F
    low: float
    high: float
    required: bool  # ok: it took effect, so every legal order holds it

    @property
    def at(self) -> float:
        """The time to quote it by: when it completed, or when it was asked if it never surely did."""
        return self.high if self.required else self.low


def _scope(op: Op | None) -> str:
    """The scope an acquire or release op names: "run" unless it says otherwise."""
    return "run" if op is None else op.get("scope", "run") or "run"


def mutex_ops(history: list[Op]) -> list[MutexOp]:
    """The history's run-level acquires and releases as model operations, in invoke order.

    Pairing by (process, f) in history order is Jepsen's rule; a completion nobody invoked stands
    alone at its own time, and an invoke left open is indeterminate with no upper bound. Only a process
    that was granted a run-level right takes part: the releases of one whose locks lived inside its writes
    are no mutex operations (they released nothing the model holds). A hold ends, as the holder's belief does
    (lab/checkers/judge.py), when it asks to release (a release that failed because the lock was gone still
    ends it), hears the lock is gone (told, held() false, a failed renewal) or is killed by the fault: the model
    then releases at that instant, so a history is a mutex exactly when nobody was granted while a holder still believed it held.
    """
    inside_writes = _inside_writes(history)
    pending: dict[tuple[str, F], int] = {}
    holding: set[str] = set()  # processes granted a run-level hold the model has not ended yet
    ended: set[str] = set()  # processes whose hold the model ended where their belief did (told, killed)
    unheld: set[int] = set()  # release invokes asked after that: the model's release came earlier
    out: list[MutexOp] = []
    for i, op in enumerate(history):
        killed = op.get("kills") if op.f is F.FAULT else None
        if killed in holding:  # a killed holder believes nothing from then on
            holding.discard(killed)
            ended.add(killed)
            out.append(MutexOp(i, killed, F.RELEASE, op.time, op.time, True))
            continue
        if op.process in inside_writes:
            continue
        if _ends_belief(op) and op.process in holding:
            holding.discard(op.process)
            ended.add(op.process)
            out.append(MutexOp(i, op.process, F.RELEASE, op.time, op.time, True))
            continue
        if op.f not in (F.ACQUIRE, F.RELEASE):
            continue
        if op.f is F.ACQUIRE and op.type is Type.INVOKE:
            ended.discard(op.process)  # a new try: whatever it gets, a release after it is the model's again
        elif op.f is F.ACQUIRE and op.type is Type.OK and _scope(op) == "run":
            holding.add(op.process)
        elif op.f is F.RELEASE and op.type is Type.INVOKE:
            if op.process in ended:
                unheld.add(i)  # asked after its hold had ended in its belief: the model released it then
            holding.discard(op.process)
        key = (op.process, op.f)
        if op.type is Type.INVOKE:
            if key in pending:  # invoked again before completing: the first never completed
                out += _as_model(history, pending.pop(key), None)
            pending[key] = i
        else:
            invoke = pending.pop(key, None)
            if invoke not in unheld:
                out += _as_model(history, invoke, i)
    for invoke in pending.values():
        out += _as_model(history, invoke, None)
    return sorted(out, key=lambda m: (m.low, m.index))


def _inside_writes(history: list[Op]) -> set[str]:
    """The processes whose every answered acquire was a lock inside a write (scope "company"): no mutex operation
    of theirs is the model's, their releases included."""
    scopes: dict[str, set[str]] = {}
    for op in history:
        if op.f is F.ACQUIRE and op.type is not Type.INVOKE:
            scopes.setdefault(op.process, set()).add(_scope(op) if op.type is Type.OK else "unknown")
    return {process for process, found in scopes.items() if found == {"company"}}


def _ends_belief(op: Op) -> bool:
    """The holder heard its lock was gone: told, held() answered false, or a renewal failed."""
    return op.f is F.TOLD or (op.f is F.HELD and op.type is Type.OK and op.get("held") is False) or (
        op.f is F.RENEW and op.type is Type.FAIL)


def _as_model(history: list[Op], invoke: int | None, completion: int | None) -> list[MutexOp]:
    """One paired operation as a model op, or nothing when it was a company lock or an acquire that failed. A
    release that failed (the lock was gone) still ended its holder's hold: it is kept, at its completion."""
    start = None if invoke is None else history[invoke]
    end = None if completion is None else history[completion]
    if "company" in (_scope(start), _scope(end)):
        return []
    first = start if start is not None else end
    assert first is not None  # a pair has its invoke, its completion or both
    if end is not None and end.type is Type.FAIL:
        if first.f is F.ACQUIRE:
            return []
        return [MutexOp(completion, first.process, F.RELEASE, first.time, end.time, True)]  # type: ignore[arg-type]
    required = end is not None and end.type is Type.OK
    index = completion if completion is not None else invoke
    assert index is not None
    high = end.time if end is not None and required else NEVER
    return [MutexOp(index, first.process, first.f, first.time, high, required)]


@dataclass
class _DeadEnd:
    """The deepest state the search could not leave: the op that had to come next, and who held."""

    depth: int = -1
    blocked: int | None = None
    holder: int = FREE


class _Search:
    """A depth-first WGL search over one history's model ops, with a memo of visited states.

    Kept as an object so the bound, the memo and the deepest dead end are shared by small steps.
    """

    def __init__(self, ops: list[MutexOp], expires_after: float | None, max_states: int, max_seconds: float):
        self.ops, self.ttl = ops, expires_after
        self.max_states, self.deadline = max_states, time.monotonic() + max_seconds
        self.full = sum(1 << i for i, m in enumerate(ops) if m.required)
        self.by_high = sorted((m.high, i) for i, m in enumerate(ops) if m.required)
        self.seen: set[tuple[int, object]] = set()
        self.dead = _DeadEnd()

    def _key(self, done: int, holder: int) -> tuple[int, object]:
        """The memo key: without a TTL only the holder's process matters, with one its acquire (its expiry)."""
        if holder == FREE or self.ttl is not None:
            return done, holder
        return done, self.ops[holder].process

    def _next_deadline(self, done: int) -> tuple[float, int | None]:
        """The earliest completion among the required ops not yet ordered, and that op (real-time order)."""
        for high, i in self.by_high:
            if not done >> i & 1:
                return high, i
        return NEVER, None

    def _lapse(self, holder: int) -> float:
        """The earliest instant the holder's lease can have expired (never, in a search without a TTL)."""
        return NEVER if self.ttl is None else self.ops[holder].low + self.ttl

    def _step(self, i: int, holder: int) -> int | None:
        """The state after op i from this state, or None when the model forbids it."""
        op = self.ops[i]
        if op.f is F.ACQUIRE:
            return i if holder == FREE else None
        return FREE if holder != FREE and self.ops[holder].process == op.process else None

    def _moves(self, done: int, holder: int) -> list[tuple[int | None, int, int]]:
        """Every legal next step as (op or None for an expiry, new done set, new holder), likeliest first.

        An op is a candidate when its invoke is not after the earliest completion still to order:
        required ops first (earliest completion first), then the holder's expiry, then optional ops.
        """
        limit, _ = self._next_deadline(done)
        required: list[tuple[float, int, int]] = []
        optional: list[tuple[float, int, int]] = []
        for i, op in enumerate(self.ops):
            if op.low > limit:
                break  # sorted by invoke: nobody later can come next
            if done >> i & 1:
                continue
            after = self._step(i, holder)
            if after is not None:
                (required if op.required else optional).append((op.high, i, after))
        moves: list[tuple[int | None, int, int]] = [(i, done | 1 << i, after) for _, i, after in sorted(required)]
        if self.ttl is not None and holder != FREE and self._lapse(holder) <= limit:
            moves.append((None, done, FREE))
        return moves + [(i, done | 1 << i, after) for _, i, after in optional]

    def _note_dead_end(self, done: int, holder: int) -> None:
        """Remember the deepest state with no legal move: it is the history's best explanation."""
        depth = (done & self.full).bit_count()
        if depth > self.dead.depth:
            self.dead = _DeadEnd(depth, self._next_deadline(done)[1], holder)

    def _out_of_bound(self) -> bool:
        """Whether the state or time bound is reached (the clock read every few hundred states)."""
        if len(self.seen) >= self.max_states:
            return True
        return len(self.seen) % _CLOCK_EVERY == 0 and time.monotonic() > self.deadline

    def run(self) -> tuple[Valid, list[int | None]]:
        """Search: TRUE with the path of moves (op positions, None for expiries), FALSE, or UNKNOWN."""
        path: list[int | None] = []  # the moves taken to reach the state on top, the start's first
        stack: list[Iterator[tuple[int | None, int, int]]] = [iter([(None, 0, FREE)])]  # a frame per depth: the moves left to try there (first: the start)
        while stack:
            move = next(stack[-1], None)
            if move is None:
                stack.pop()
                if path:
                    path.pop()
                continue
            op, done, holder = move
            if self._key(done, holder) in self.seen:
                continue
            if self._out_of_bound():
                return Valid.UNKNOWN, []
            self.seen.add(self._key(done, holder))
            path.append(op)
            if done & self.full == self.full:
                return Valid.TRUE, path[1:]  # every required op ordered; optional ones left out
            moves = self._moves(done, holder)
            if not moves:
                self._note_dead_end(done, holder)
            stack.append(iter(moves))
        return Valid.FALSE, []


def _why_not(search: _Search) -> str:
    """One line for FALSE: the op that had to come next and the hold that forbade it."""
    ops, dead = search.ops, search.dead
    if dead.blocked is None:
        return "no legal order of the run-level acquires and releases"
    op = ops[dead.blocked]
    if dead.holder == FREE:
        return f"{op.process}'s {op.f.value} at {op.at:.3f}s while nobody held"
    held = ops[dead.holder]
    line = f"{op.process}'s {op.f.value} at {op.at:.3f}s while {held.process} held since {held.at:.3f}s"
    if search.ttl is not None:
        line += f" (its {search.ttl:g}s lease could not lapse before {search._lapse(dead.holder):.3f}s)"
    return line


def _why(ops: list[MutexOp], path: list[int | None], ttl: float | None, holders: list[int]) -> str:
    """One line for TRUE: how many ops the legal order has, and whose leases it let lapse."""
    ordered = sum(1 for i in path if i is not None)
    line = f"a legal order of {ordered} of {len(ops)} operations exists"
    if holders:
        names = ", ".join(dict.fromkeys(ops[h].process for h in holders))
        line += f", with {names}'s {ttl:g}s lease lapsing"
    return line


def _expired_holders(ops: list[MutexOp], path: list[int | None]) -> list[int]:
    """The acquires whose hold the legal order ended by expiry rather than by release."""
    holder, out = FREE, []
    for i in path:
        if i is None:
            out.append(holder)
            holder = FREE
        else:
            holder = i if ops[i].f is F.ACQUIRE else FREE
    return out


def _check(history: list[Op], *, expires_after: float | None = None, max_states: int = 100_000,
           max_seconds: float = 2.0) -> tuple[Linearization, tuple[int, ...]]:
    """The search and its proof: for FALSE, the history indices of the blocked op and the hold before it."""
    ops = mutex_ops(history)
    if not ops:  # an empty order is legal, but it answers nothing: the history has no mutex in it to judge
        return Linearization(Valid.UNKNOWN, (), 0, NOTHING_TO_ORDER), ()
    search = _Search(ops, expires_after, max_states, max_seconds)
    valid, path = search.run()
    explored = len(search.seen)
    if valid is Valid.TRUE:
        order = tuple(ops[i].index for i in path if i is not None)
        detail = _why(ops, path, expires_after, _expired_holders(ops, path))
        return Linearization(valid, order, explored, detail), ()
    if valid is Valid.UNKNOWN:
        detail = f"bound reached after {explored} states ({len(ops)} operations, max_states={max_states}, " \
                 f"max_seconds={max_seconds:g})"
        return Linearization(valid, (), explored, detail), ()
    dead = search.dead
    proof = tuple(sorted(ops[i].index for i in (dead.holder, dead.blocked) if i is not None and i != FREE))
    return Linearization(valid, (), explored, _why_not(search)), proof


def check_mutex(history: list[Op], *, expires_after: float | None = None,
                max_states: int = 100_000, max_seconds: float = 2.0) -> Linearization:
    """Whether some order of the history's run-level acquires and releases is a legal mutex (or lease).

    The lab's exclusion checker compares intervals; this one asks Jepsen's question, so an
    indeterminate release or a lapsed lease is judged by what it may have done, not by a guess.
    """
    return _check(history, expires_after=expires_after, max_states=max_states, max_seconds=max_seconds)[0]


def mutex_finding(history: list[Op], **kwargs) -> Finding:
    """The search as one of judge()'s findings: checker 'linearizable (mutex)', Kind.LOST when invalid.

    Its proof is the blocked op and the acquire that held the lock (history indices); UNKNOWN (the bound reached,
    or nothing to order) has no kind, so it changes no verdict.
    """
    result, proof = _check(history, **kwargs)
    kind = Kind.LOST if result.valid is Valid.FALSE else None
    return Finding(CHECKER, result.valid, kind, proof, result.detail)
