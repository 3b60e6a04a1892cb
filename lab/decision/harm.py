"""The harm a need is decided on, and how one trial reads for it.

Every judged trial answers apart whether the lock kept its promise in the history that survived, whether the
company stayed whole, whether the store kept what it acknowledged, and whether two holders believed they held at
once as they were told (lab/checkers/verdict.py). A need cares about one harm: where every write lives in the
database, the surviving company whole with no stale write in it (a write the store discarded is the store's);
where the writes go somewhere nothing can refuse a stale one, two holders at once is the harm itself.
"""

from __future__ import annotations

from lab.checkers.outcomes import Safety, judgement_of, safety_of
from lab.checkers.verdict import Question, Valid, answers_of
from lab.declarations.described_enum import DescribedStrEnum


class Harm(DescribedStrEnum):
    """What a need is decided on."""

    SURVIVING_COMPANY = ("surviving company", "the company in the surviving store whole, and no stale write in it: "
                         "a write the store acknowledged and then discarded is the store's finding")
    TWO_HOLDERS = ("two holders", "two holders believing they held at once, whatever the store kept: nothing "
                   "downstream can refuse a stale write")

    @property
    def meaning(self) -> str:
        return self.__doc__ or ""


def two_holders(record: dict) -> bool:
    """Whether another process held the right while this trial's holder still believed it held (the verdict's
    `lock`, judged on the history as acknowledged)."""
    judgement = judgement_of(record)
    return judgement is not None and judgement.get("lock") == Valid.FALSE.value


def safety_for(record: dict, harm: Harm) -> Safety:
    """A trial's safety read for a harm: as recorded for the surviving company; unsafe for two holders whenever two
    believed they held at once."""
    if harm is Harm.TWO_HOLDERS and two_holders(record):
        return Safety.UNSAFE
    return safety_of(record)


def store_only(record: dict, harm: Harm = Harm.SURVIVING_COMPANY) -> bool:
    """Whether a trial failed only as a store: it lost an acknowledged write while its lock kept its promise (and,
    read for two holders, no two believed they held at once)."""
    judgement = judgement_of(record)
    if judgement is None:
        return False
    found = answers_of(judgement)
    kept = found[Question.STORE] is Valid.FALSE and found[Question.LOCK] is Valid.TRUE
    return kept and not (harm is Harm.TWO_HOLDERS and two_holders(record))
