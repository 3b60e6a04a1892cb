"""One history per trial, in Jepsen's shape: ordered operations {process, type, f, value, time}.

Every judged scenario records its trial as a list of `Op`s; the checkers (lab/checkers/judge.py)
read nothing else, so the same behaviour gets the same verdict whichever scenario shows it. The
kill-point event vocabulary of schema 1 (lab/checkers/history.py) maps onto these operations one for
one (`from_events`), so it is the seed of this format rather than a second one.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import Enum

# The version of a trial record's `history` and `judgement`: 1 (absent) had free verdict strings and,
# in killpoints only, event lists; 2 has this history and a typed verdict on every judged trial.
SCHEMA = 2


class Type(str, Enum):
    """How an operation completed, as Jepsen writes it."""

    INVOKE = "invoke"  # the process asked
    OK = "ok"  # it happened
    FAIL = "fail"  # it did not happen
    INFO = "info"  # nobody knows whether it happened (a connection broken mid-COMMIT, a timeout)


class F(str, Enum):
    """What was done."""

    ACQUIRE = "acquire"  # value: token, scope ("run": a run-level right; "company": a lock inside the write)
    RENEW = "renew"
    RELEASE = "release"  # ok: release reported success; fail: it raised (the lock was gone)
    HELD = "held"  # the holder asked whether it still held: value held (bool)
    WRITE = "write"  # a company's write transaction: invoke at its first statement, ok at commit
    COMMIT = "commit"  # invoke: COMMIT about to be sent (the sound bound for when it landed)
    OBSERVE = "observe"  # an observer read a company's row count: value company, count
    TOLD = "told"  # the holder heard its lock was gone: value how, via, text
    FAULT = "fault"  # the fault injector struck: value name, evidence
    HEAL = "heal"  # the fault was undone
    CLOCK = "clock"  # a process's clock read against the real one: value clock (whose), offset_s (its time minus
    # the real time), and for a process of the lab's own (the holder) monotonic_offset_s; no checker reads it


@dataclass(frozen=True)
class Op:
    """One operation of a history; time is seconds on the trial's monotonic clock."""

    process: str
    type: Type
    f: F
    time: float
    value: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"process": self.process, "type": self.type.value, "f": self.f.value, "time": self.time,
                **({"value": self.value} if self.value else {})}

    @classmethod
    def from_json(cls, data: dict) -> Op:
        return cls(data["process"], Type(data["type"]), F(data["f"]), float(data["time"]),
                   dict(data.get("value") or {}))

    def get(self, name: str, default=None):
        return self.value.get(name, default)


class Recorder:
    """A thread-safe, append-only history on one monotonic clock (time.monotonic: one clock for every
    thread and process on the machine, so a holder process's times line up with the trial's)."""

    def __init__(self, t0: float | None = None):
        self.t0 = time.monotonic() if t0 is None else t0
        self._ops: list[Op] = []
        self._lock = threading.Lock()

    def add(self, process: str, type_: Type, f: F, at: float | None = None, **value) -> Op:
        """Record an operation now (or at the monotonic time `at`); None values are left out."""
        moment = time.monotonic() if at is None else at
        op = Op(process, type_, f, round(moment - self.t0, 4), {k: v for k, v in value.items() if v is not None})
        with self._lock:
            self._ops.append(op)
        return op

    def granted(self, process: str, got: bool, at: float | None = None, **value) -> Op:
        """A run-level acquire's completion: ok with scope "run" (and value) when it got the right, else fail."""
        if got:
            return self.add(process, Type.OK, F.ACQUIRE, at=at, scope="run", **value)
        return self.add(process, Type.FAIL, F.ACQUIRE, at=at)

    def extend(self, ops: list[Op]) -> None:
        with self._lock:
            self._ops.extend(ops)

    def ops(self) -> list[Op]:
        """The history in time order (a stable sort keeps the order of operations recorded at one time)."""
        with self._lock:
            return sorted(self._ops, key=lambda op: op.time)


# Schema 1's kill-point events, as operations: event -> (type, f, value names carried over).
_EVENTS = {
    "acquire_requested": (Type.INVOKE, F.ACQUIRE),
    "acquire_granted": (Type.OK, F.ACQUIRE),
    "acquire_refused": (Type.FAIL, F.ACQUIRE),
    "acquire_error": (Type.INFO, F.ACQUIRE),  # the lock's server did not answer: no grant heard of
    "company_locked": (Type.OK, F.ACQUIRE),
    "write_begun": (Type.INVOKE, F.WRITE),
    "commit_requested": (Type.INVOKE, F.COMMIT),
    "write_committed": (Type.OK, F.WRITE),
    "write_rejected": (Type.FAIL, F.WRITE),
    "write_failed": (Type.FAIL, F.WRITE),
    "write_indeterminate": (Type.INFO, F.WRITE),
    "release_requested": (Type.INVOKE, F.RELEASE),
    "fault_fired": (Type.OK, F.FAULT),
    "fault_healed": (Type.OK, F.HEAL),
    "observed": (Type.OK, F.OBSERVE),
}


def op_of_event(event: dict) -> Op:
    """One schema-1 event as an operation (its time kept as it was recorded)."""
    name = event["event"]
    value = {k: v for k, v in event.items() if k not in ("t", "run", "event") and v is not None}
    if name == "release":
        type_, f = (Type.OK if value.pop("ok", False) else Type.FAIL), F.RELEASE
    else:
        type_, f = _EVENTS[name]
    if name == "acquire_granted":
        value["scope"] = "company" if value.pop("company_scoped", False) else "run"
    elif name == "company_locked":
        value["scope"] = "company"
    elif name == "write_rejected":
        value["fenced"] = True
    elif name == "observed" and "count" in value:
        value["count"] = int(value["count"])
    return Op(event["run"], type_, f, float(event["t"]), value)


def from_events(events: list[dict]) -> list[Op]:
    """A schema-1 kill-point history as operations, in time order."""
    return sorted((op_of_event(e) for e in events), key=lambda op: op.time)


def to_json(ops: list[Op]) -> list[dict]:
    return [op.to_json() for op in ops]


def from_json(data: list[dict]) -> list[Op]:
    return [Op.from_json(d) for d in data]
