"""A failure charged to what failed: the lock, or the store (the database or its manager), read from each trial's
three answers (lab/checkers/verdict.py: lock, company, store) and the no-lock control beside it.

A trial that lost an acknowledged write while the lock kept its promise says something about the store, not the
lock; when the control, which takes no lock, lost acknowledged writes under the same fault the same way, the loss
is the store's, and it disqualifies no lock. Anything else that failed is the lock's (the strategy's: a company
merged although the lock held is still its failure to keep the company whole).
"""

from __future__ import annotations

from lab.checkers.outcomes import Safety, judgement_of, safety_of
from lab.checkers.verdict import Question, Valid, answers_of


def answers(record: dict) -> dict[Question, Valid] | None:
    """A judged trial's three answers; None for a record without a judgement (cost figures, old schemas)."""
    judgement = judgement_of(record)
    return None if judgement is None else answers_of(judgement)


def store_only(record: dict) -> bool:
    """Whether a trial failed only as a store: it lost an acknowledged write while its lock kept its promise."""
    found = answers(record)
    return found is not None and found[Question.STORE] is Valid.FALSE and found[Question.LOCK] is Valid.TRUE


def charged_to_store(records: list[dict], control: list[dict]) -> bool:
    """Whether a cell's failures are all the store's: every unsafe trial lost only an acknowledged write with its
    lock's promise kept, and the control under the same fault lost one the same way."""
    unsafe = [r for r in records if r.get("status") == "ok" and safety_of(r) is Safety.UNSAFE]
    return bool(unsafe) and all(store_only(r) for r in unsafe) and any(
        store_only(r) for r in control if r.get("status") == "ok")


def store_losses(records: list[dict]) -> int:
    """How many of a cell's trials lost an acknowledged write (whatever the lock did)."""
    found = [answers(r) for r in records if r.get("status") == "ok"]
    return sum(1 for a in found if a is not None and a[Question.STORE] is Valid.FALSE)


def lock_broke_with_store(record: dict) -> bool:
    """Whether a trial lost an acknowledged write and its lock broke its promise too (two holders' writes in a split
    brain): its words name the store's loss, the worst kind, but the failure is the lock's."""
    found = answers(record)
    return found is not None and found[Question.STORE] is Valid.FALSE and found[Question.LOCK] is Valid.FALSE
