"""A trial's typed verdict: what the checkers found, as values, never as words.

The checkers (lab/checkers/judge.py) return a `Verdict`; lab/checkers/words.py is the one place that
turns it into text. Safety asks one question, the mission's: did the company stay one run's whole
rebuild? Whether the *lock* was held by two at once is asked apart (`lock`), because a fenced lock
can lose its lock and still keep the company whole, and a trial that never writes can show the
first but not the second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from lab.checkers.outcomes import Safety


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


class Timeline(str, Enum):
    """Which history a checker judged. A store can acknowledge a write and then throw it away (a primary rewound
    after a split brain): the holders believed what they were told, the company is what survived."""

    ACKNOWLEDGED = "acknowledged"  # every write as its client was told it ended: what each holder believed
    SURVIVED = "survived"  # the same, less the acknowledged writes the store discarded: what the company is made of


class Question(str, Enum):
    """The three questions every judged trial answers apart, so that a failure is charged to what failed."""

    LOCK = "lock"  # did the lock keep its promise in what survived: no superseded holder's write kept, no lost lock
    # unnoticed (a write the store discarded is the store's finding, never a stale write)
    COMPANY = "company"  # did the company stay one run's whole rebuild
    STORE = "store"  # did the store keep every write it acknowledged


# The kinds that answer each question no (INDETERMINATE leaves the lock's answer unknown).
QUESTION_OF = {
    Kind.LOST: Question.LOCK, Kind.STALE_WRITE_ACCEPTED: Question.LOCK, Kind.OVERLAPPING_WRITES: Question.LOCK,
    Kind.FALSE_RELEASE: Question.LOCK, Kind.INDETERMINATE: Question.LOCK,
    Kind.MERGED: Question.COMPANY, Kind.SHORT: Question.COMPANY, Kind.TORN: Question.COMPANY,
    Kind.ACKNOWLEDGED_WRITE_LOST: Question.STORE,
}
# The checkers whose finding, valid or not, answers a question (an unknown one leaves it unknown).
_DECIDES = {"company": Question.COMPANY, "acknowledged writes": Question.STORE}


def answers(kind: Kind, findings: tuple[Finding, ...] | list[Finding]) -> dict[Question, Valid]:
    """The three answers from a trial's findings and its composed kind.

    The lock answers no when a superseded holder's write was accepted, two holders' writes overlapped, a release
    lied, or the lock was lost with nothing written after it (the composed kind LOST); unknown when a lapsed
    holder's commit has no known outcome. A lock lost while its fence refused the write still kept its promise.
    The company answers from the final table and the observers; the store from the acknowledged writes."""
    found = {question: Valid.TRUE for question in Question}
    for f in findings:
        if f.timeline is Timeline.ACKNOWLEDGED:
            continue  # what the holders believed: the verdict's `lock` (two holders at once), not a question here
        question = QUESTION_OF.get(f.kind) if f.kind is not None else None
        if question is not None and f.valid is not Valid.TRUE and f.kind is not Kind.LOST:
            found[question] = _worse(found[question], Valid.UNKNOWN if f.kind is Kind.INDETERMINATE else f.valid)
        elif f.kind is None and f.valid is Valid.UNKNOWN and f.checker in _DECIDES:
            found[_DECIDES[f.checker]] = _worse(found[_DECIDES[f.checker]], Valid.UNKNOWN)
    if kind is Kind.LOST:
        found[Question.LOCK] = Valid.FALSE
    return found


def _worse(a: Valid, b: Valid) -> Valid:
    order = (Valid.FALSE, Valid.UNKNOWN, Valid.TRUE)
    return min(a, b, key=order.index)


@dataclass(frozen=True)
class Finding:
    """One checker's answer: its name, valid or not, the kind it found, the operations that prove it."""

    checker: str
    valid: Valid
    kind: Kind | None = None
    proof: tuple[int, ...] = ()  # indices into the trial's history
    detail: str = ""
    # The history it judged, where the two differ (a store discarded an acknowledged write); None: both are one.
    timeline: Timeline | None = None


@dataclass(frozen=True)
class Verdict:
    """A trial's verdict: its kind, the company's safety, the lock's exclusion, and whether the fault
    took the right away (exercised); figures are the numbers the words quote (rows, detection)."""

    kind: Kind
    # Two processes holding the right at once, each believing it held: FALSE. Judged on the acknowledged timeline
    # (what each was told): the harm itself where nothing downstream can refuse a stale write.
    lock: Valid
    exercised: bool | None
    findings: tuple[Finding, ...] = ()
    figures: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def safety(self) -> Safety:
        return SAFETY_OF[self.kind]

    @property
    def answers(self) -> dict[Question, Valid]:
        """Lock, company and store, each answered apart (answers())."""
        return answers(self.kind, self.findings)

    @property
    def proof(self) -> tuple[int, ...]:
        return tuple(sorted({i for f in self.findings if f.kind is self.kind for i in f.proof}))

    def to_json(self) -> dict:
        return {"kind": self.kind.value, "safety": self.safety.value, "lock": self.lock.value,
                "answers": {q.value: v.value for q, v in self.answers.items()},
                "exercised": self.exercised, "figures": self.figures,
                "findings": [{"checker": f.checker, "valid": f.valid.value,
                              **({"kind": f.kind.value} if f.kind else {}),
                              **({"proof": list(f.proof)} if f.proof else {}),
                              **({"detail": f.detail} if f.detail else {}),
                              **({"timeline": f.timeline.value} if f.timeline else {})} for f in self.findings]}

    @classmethod
    def from_json(cls, data: dict) -> Verdict:
        findings = tuple(Finding(f["checker"], Valid(f["valid"]), Kind(f["kind"]) if "kind" in f else None,
                                 tuple(f.get("proof", ())), f.get("detail", ""),
                                 Timeline(f["timeline"]) if f.get("timeline") else None)
                         for f in data.get("findings", ()))
        return cls(Kind(data["kind"]), Valid(data["lock"]), data.get("exercised"), findings,
                   dict(data.get("figures") or {}))


def worst(kinds) -> Kind:
    """The worst of some kinds: composing checkers keeps the worst."""
    return min(kinds, key=RANK.__getitem__)


def answers_of(judgement: dict) -> dict[Question, Valid]:
    """A recorded judgement's three answers: as it recorded them, or, for a run that predates them, from its
    findings, the same way a new trial's are made."""
    recorded = judgement.get("answers")
    if isinstance(recorded, dict) and all(q.value in recorded for q in Question):
        return {q: Valid(recorded[q.value]) for q in Question}
    if "kind" not in judgement:  # no composed kind to read: nothing is known
        return {q: Valid.UNKNOWN for q in Question}
    return Verdict.from_json(judgement).answers
