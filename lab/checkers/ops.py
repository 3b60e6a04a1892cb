"""One history per trial, in Jepsen's shape: ordered operations {process, type, f, value, time}.

Every judged scenario records its trial as a list of `Op`s, into a `Recorder` as it runs; the checkers
(lab/checkers/judge.py) read nothing else, so the same behaviour gets the same verdict whichever scenario
shows it. This is the lab's one form of a history: schema 1's kill-point event lists, which every record on
disk that has them also holds as this history, are no longer read.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import Enum

# The version of a trial record's `history` and `judgement`: 1 (absent) had free verdict strings and,
# in killpoints only, event lists; 2 has this history and a typed verdict on every judged trial. (A kill-point
# counterexample recorded before issue 46 also kept its schema-1 event list, `minimal.events`, beside the same
# history: nothing reads it.)
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

    def observed(self, company: int, count: int) -> None:
        """The observer saw a company's row count change: an Observer's on_change."""
        self.add("observer", Type.OK, F.OBSERVE, company=company, count=int(count))

    def extend(self, ops: list[Op]) -> None:
        with self._lock:
            self._ops.extend(ops)

    def ops(self) -> list[Op]:
        """The history in time order (a stable sort keeps the order of operations recorded at one time)."""
        with self._lock:
            return sorted(self._ops, key=lambda op: op.time)


def to_json(ops: list[Op]) -> list[dict]:
    return [op.to_json() for op in ops]


def from_json(data: list[dict]) -> list[Op]:
    return [Op.from_json(d) for d in data]
