"""A trial's typed verdict: what the checkers found, as values, never as words.

The checkers (lab/harness/judge.py) return a `Verdict`; lab/harness/words.py is the one place that
turns it into text. Safety asks one question, the mission's: did the company stay one run's whole
rebuild? Whether the *lock* was held by two at once is asked apart (`lock`), because a fenced lock
can lose its lock and still keep the company whole, and a trial that never writes can show the
first but not the second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from lab.harness.outcomes import Safety


class Valid(str, Enum):
    """A checker's answer, as Jepsen's checkers give it: valid, invalid, or unknown."""

    TRUE = "true"
    FALSE = "false"
    UNKNOWN = "unknown"


class Kind(str, Enum):
    """What a trial showed, worst first within each safety (the order `worst` composes by)."""

    # The company did not stay one run's whole rebuild, or a rebuild its run was told had committed is gone.
    ACKNOWLEDGED_WRITE_LOST = "acknowledged write lost"  # a commit that returned ok is not in the final state
    STALE_WRITE_ACCEPTED = "stale write accepted"  # a run committed after a newer run had the company
    OVERLAPPING_WRITES = "overlapping writes"  # two runs inside committed writes of one company at once
    MERGED = "merged"  # two rebuilds' rows in one company (the post's 500 rows)
    SHORT = "short"  # fewer rows than one rebuild
    TORN = "torn"  # an observer saw a half-written company
    FALSE_RELEASE = "false release"  # release reported success for a lock another run had taken
    # Nobody can tell.
    INDETERMINATE = "indeterminate"  # a commit whose outcome is unknown after the lock was lost
    # The lock was held by two at once, and the trial had no write to judge.
    LOST = "lost"
    # The company stayed whole although the fault took the right away.
    STALE_WRITE_REJECTED = "stale write rejected"  # the storage's fence refused the lapsed holder's write
    ROLLED_BACK = "rolled back"  # the lapsed holder's write failed with its transaction
    # Nothing took the right away, and the company stayed whole.
    INTACT = "intact"  # two runs, one company, one whole rebuild
    HELD = "held"  # the holder kept its right; nobody else got in
    NOT_ACQUIRED = "not acquired"  # the holder never got the right, so nothing was tested


SAFETY_OF = {
    Kind.ACKNOWLEDGED_WRITE_LOST: Safety.UNSAFE,
    Kind.STALE_WRITE_ACCEPTED: Safety.UNSAFE, Kind.OVERLAPPING_WRITES: Safety.UNSAFE, Kind.MERGED: Safety.UNSAFE,
    Kind.SHORT: Safety.UNSAFE, Kind.TORN: Safety.UNSAFE, Kind.FALSE_RELEASE: Safety.UNSAFE,
    Kind.INDETERMINATE: Safety.UNKNOWN, Kind.LOST: Safety.UNTESTED,
    Kind.STALE_WRITE_REJECTED: Safety.SAFE, Kind.ROLLED_BACK: Safety.SAFE,
    Kind.INTACT: Safety.SAFE, Kind.HELD: Safety.SAFE, Kind.NOT_ACQUIRED: Safety.UNTESTED,
}
RANK = {kind: i for i, kind in enumerate(Kind)}


@dataclass(frozen=True)
class Finding:
    """One checker's answer: its name, valid or not, the kind it found, the operations that prove it."""

    checker: str
    valid: Valid
    kind: Kind | None = None
    proof: tuple[int, ...] = ()  # indices into the trial's history
    detail: str = ""


@dataclass(frozen=True)
class Verdict:
    """A trial's verdict: its kind, the company's safety, the lock's exclusion, and whether the fault
    took the right away (exercised); figures are the numbers the words quote (rows, detection)."""

    kind: Kind
    lock: Valid  # two processes holding the right at once, each believing it held: FALSE
    exercised: bool | None
    findings: tuple[Finding, ...] = ()
    figures: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def safety(self) -> Safety:
        return SAFETY_OF[self.kind]

    @property
    def proof(self) -> tuple[int, ...]:
        return tuple(sorted({i for f in self.findings if f.kind is self.kind for i in f.proof}))

    def to_json(self) -> dict:
        return {"kind": self.kind.value, "safety": self.safety.value, "lock": self.lock.value,
                "exercised": self.exercised, "figures": self.figures,
                "findings": [{"checker": f.checker, "valid": f.valid.value,
                              **({"kind": f.kind.value} if f.kind else {}),
                              **({"proof": list(f.proof)} if f.proof else {}),
                              **({"detail": f.detail} if f.detail else {})} for f in self.findings]}

    @classmethod
    def from_json(cls, data: dict) -> Verdict:
        findings = tuple(Finding(f["checker"], Valid(f["valid"]), Kind(f["kind"]) if "kind" in f else None,
                                 tuple(f.get("proof", ())), f.get("detail", "")) for f in data.get("findings", ()))
        return cls(Kind(data["kind"]), Valid(data["lock"]), data.get("exercised"), findings,
                   dict(data.get("figures") or {}))


def worst(kinds) -> Kind:
    """The worst of some kinds: composing checkers keeps the worst."""
    return min(kinds, key=RANK.__getitem__)
