"""One cell: a backend's trials under one fault column, judged beside the no-lock control, read for a harm.

A cell's mark says what the fault did to the lock: ✗ failed, ⚠ lost (no write to judge), ◆ the store lost an
acknowledged write as the control did, ✓ the right was taken away and the company stayed whole, ○ the fault struck
but never took the right away (proves nothing), *unaffected* (○ where the lock declares, and the column's struck
services confirm, that the fault cannot reach its lock), ? unknown, *not run* (the lab could not), *does not run*
(this machine lacks what it needs), *n/a* (the fault reaches none of the lock's parts). The same trials can read ✗
for one harm and ◆ for another (lab/decision/harm.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from enum import Enum

from lab.checkers.outcomes import Safety, SkipKind, exercised_of, judgement_of, skip_of
from lab.checkers.verdict import Kind, Question, Valid, answers_of
from lab.decision.harm import Harm, safety_for, store_only, two_holders
from lab.decision.strength import bound_text, rate_text, strong, upper_bound
from lab.measures.kinds import Measured

# Calibration measures detection: every verdict there is a lost lock, said so in the cell.
CALIBRATION_WORDS = {"within one poll": "lost within one poll", "late": "lost, detected late",
                     "not detected": "lost, never detected"}
NOT_EXERCISED = "○ not exercised:"
UNSTABLE = "↯"  # a cell whose mark changed against the previous reference
TWO_HOLDERS_WORDS = "two holders at once"


class Mark(Enum):
    """What a matrix cell says about a backend under a fault."""

    FAILED = "✗"  # some trial let another run in while the holder still believed it held
    # The store lost acknowledged writes while the lock kept its promise, as the no-lock control did under the same
    # fault: a finding about the database or its manager, never the lock's failure.
    STORE = "◆"
    KEPT = "✓"  # every trial kept the company whole (and, where recorded, the fault took the lock away)
    NOT_EXERCISED = "○"  # the fault struck, but in no trial did it take the lock away: proves nothing
    # ○ where the fault cannot reach the lock by its declaration (it lives on a service the column does not strike)
    # and every trial kept the company whole: the lock was never the fault's to take.
    UNAFFECTED = "unaffected"
    UNKNOWN = "?"  # no failure, but some trial's safety could not be judged
    LOST = "⚠"  # the lock was lost while its holder believed it held, and the trials wrote nothing after it
    NOT_APPLICABLE = "n/a"
    DOES_NOT_RUN = "does not run"
    ERROR = "error"
    NOT_RUN = "not run"
    CONTROL = "control"  # the no-lock baseline's cell: what the store does on its own under the fault, never a ✓


# Every mark, worst first: what a summary of several cells leads with (lab/report/fault_summary.py). A new mark
# takes its place here, by what it says against the lock; tests/fast/test_fault_summary.py fails until it does.
SEVERITY = (Mark.FAILED, Mark.LOST, Mark.ERROR, Mark.UNKNOWN, Mark.STORE, Mark.NOT_RUN, Mark.DOES_NOT_RUN,
            Mark.NOT_EXERCISED, Mark.UNAFFECTED, Mark.KEPT, Mark.CONTROL, Mark.NOT_APPLICABLE)


def severity(mark: Mark) -> int:
    """A mark's rank in SEVERITY: 0 is the worst."""
    return SEVERITY.index(mark)


@dataclass(frozen=True)
class Cell:
    mark: Mark
    text: str
    exercised: int = 0  # ok trials whose fault took the lock away (a search: its schedules that struck)
    not_exercised: int = 0  # ok trials whose fault did not
    unrecorded: int = 0  # ok trials of a run that did not record it
    n: int = 0  # ok trials behind the cell
    bound: float | None = None  # a ✓'s 95 % upper bound of its per-trial failure rate (lab/decision/strength.py)
    unstable: bool = False  # its mark differs from the previous reference's
    failed: int = 0  # trials that failed (read for the cell's harm)
    previous: Mark | None = None  # the previous reference's mark, where it differs

    @property
    def strong(self) -> bool:
        """A ✓ whose bound meets the declared one."""
        return strong(self.bound)

    def __str__(self) -> str:
        return self.text


def _verdict_word(record: dict, harm: Harm) -> str:
    verdict = record["verdict"]
    word = CALIBRATION_WORDS.get(verdict, verdict) if record.get("measured") == Measured.CALIBRATION else verdict
    if harm is Harm.TWO_HOLDERS and two_holders(record):  # the harm itself here, whatever the company kept
        return TWO_HOLDERS_WORDS if record.get("safety") != Safety.UNSAFE.value else f"{TWO_HOLDERS_WORDS}, {word}"
    return word


def _acquired(record: dict) -> bool:
    """Whether the trial's holder got the right at all: a trial whose holder never did ('not acquired') tested
    nothing, so it reads as not exercised, never as a lost lock."""
    judgement = judgement_of(record)
    return judgement is None or judgement.get("kind") != Kind.NOT_ACQUIRED.value


def trials_in(record: dict) -> int:
    """How many trials a record stands for: a kill-point search, each schedule that struck; any other, one."""
    struck = (record.get("measures") or {}).get("struck")
    return struck if isinstance(struck, int) and not isinstance(struck, bool) and struck > 0 else 1


def judge(records: list[dict], harm: Harm = Harm.SURVIVING_COMPANY) -> Cell:
    """A cell's mark and text from its trials' safety (read for the harm) and exercised fields."""
    if not records:
        return Cell(Mark.NOT_RUN, "not run")
    ok = [r for r in records if r["status"] == "ok"]
    if not ok:
        skipped = [r for r in records if r["status"] == "skipped"]
        kinds = {skip_of(r) for r in skipped}
        if SkipKind.NOT_APPLICABLE in kinds:
            return Cell(Mark.NOT_APPLICABLE, "n/a")  # the fault cannot reach it, whatever else kept it from running
        if kinds == {SkipKind.DOES_NOT_RUN}:
            return Cell(Mark.DOES_NOT_RUN, "does not run")  # the library cannot work here; reason in Every outcome
        if kinds:
            return Cell(Mark.NOT_RUN, "not run")  # the fault reaches it, the lab could not run it: unknown
        return Cell(Mark.ERROR, f"error {len(records)}/{len(records)}")
    total = len([r for r in records if r["status"] != "skipped"])
    counts = Counter(_verdict_word(r, harm) for r in ok)
    text = ", ".join(f"{v} {n}/{total}" for v, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    errors = sum(r["status"] == "error" for r in records)
    if errors:
        text += f", error {errors}/{total}"
    safety = [safety_for(r, harm) for r in ok]
    exercised = [exercised_of(r) for r in ok]
    yes = sum(trials_in(r) for r, e in zip(ok, exercised) if e is True)
    no, unrecorded = exercised.count(False), exercised.count(None)
    failed = safety.count(Safety.UNSAFE)

    def counted(mark: Mark, words: str, bound: float | None = None) -> Cell:
        return Cell(mark, words, exercised=yes, not_exercised=no, unrecorded=unrecorded, n=len(ok), bound=bound,
                    failed=failed)

    if failed:  # a failure found stands, whatever else errored
        return counted(Mark.FAILED, f"✗ {text} · rate {rate_text(failed, len(ok))}")
    if errors:  # the survivors of a partly errored cell are not a result
        reason = next(str(r.get("reason") or "") for r in records if r["status"] == "error")
        return counted(Mark.ERROR, f"incomplete: error {errors}/{total} ({reason[:80]}); {text}")
    if Safety.UNKNOWN in safety:
        return counted(Mark.UNKNOWN, f"? {text}, safety unknown {safety.count(Safety.UNKNOWN)}/{len(ok)}")
    if any(sa is Safety.UNTESTED and _acquired(r) for r, sa in zip(ok, safety)):
        return counted(Mark.LOST, f"⚠ {text}")  # a lost lock; what a write would do is another column's
    if no == len(ok):
        return counted(Mark.NOT_EXERCISED, f"{NOT_EXERCISED} {text}")
    # The bound counts the trials that took the right away (all of them, for a run that did not record it).
    bound = upper_bound(0, yes if yes else unrecorded)
    taken = exercised.count(True)
    if taken == len(ok) or unrecorded == len(ok):  # all unrecorded: kept whole, exercised not claimed
        return counted(Mark.KEPT, f"✓ {text} · {bound_text(bound)}", bound)
    return counted(Mark.KEPT, f"✓ {text}, {taken}/{len(ok)} exercised · {bound_text(bound)}", bound)


def charged_to_store(records: list[dict], control: list[dict], harm: Harm = Harm.SURVIVING_COMPANY) -> bool:
    """Whether a cell's failures are all the store's: every unsafe trial lost only an acknowledged write with its
    lock's promise kept, and the control under the same fault lost one the same way."""
    unsafe = [r for r in records if r.get("status") == "ok" and safety_for(r, harm) is Safety.UNSAFE]
    return bool(unsafe) and all(store_only(r, harm) for r in unsafe) and any(
        store_only(r) for r in control if r.get("status") == "ok")


def store_losses(records: list[dict]) -> int:
    """How many of a cell's trials lost an acknowledged write (whatever the lock did)."""
    found = [answers_of(j) for r in records if r.get("status") == "ok" and (j := judgement_of(r)) is not None]
    return sum(1 for a in found if a[Question.STORE] is Valid.FALSE)


def lock_broke_with_store(record: dict) -> bool:
    """Whether a trial lost an acknowledged write and its lock broke its promise too, in what survived: the failure
    is the lock's, its words name the store's loss."""
    judgement = judgement_of(record)
    if judgement is None:
        return False
    found = answers_of(judgement)
    return found[Question.STORE] is Valid.FALSE and found[Question.LOCK] is Valid.FALSE


def judge_in_column(records: list[dict], control: list[dict], is_control: bool = False,
                    harm: Harm = Harm.SURVIVING_COMPANY, unaffected: str | None = None) -> Cell:
    """A cell judged beside its column's no-lock control: the control's own cell is shown as the control (what the
    store does on its own, never a ✓); a failure whose every unsafe trial lost only an acknowledged write with the
    lock's promise kept, as the control's did, is the store's (◆), not the lock's; a ○ is *unaffected* when the
    caller gives the declared reason the fault cannot reach the lock (the lock's service is not among the column's
    struck services)."""
    cell = judge(records, harm)
    if is_control and cell.mark in (Mark.FAILED, Mark.KEPT, Mark.NOT_EXERCISED, Mark.UNKNOWN, Mark.LOST):
        words = cell.text.split(" ", 1)[1] if cell.mark is not Mark.NOT_EXERCISED else cell.text.removeprefix(
            f"{NOT_EXERCISED} ")
        return replace(cell, mark=Mark.CONTROL, text=f"control: {words.split(' · ')[0]}", bound=None)
    if cell.mark is Mark.FAILED and charged_to_store(records, control, harm):
        return replace(cell, mark=Mark.STORE, text=f"◆ store: {cell.text.removeprefix('✗ ').split(' · ')[0]}")
    if cell.mark is Mark.FAILED and any(lock_broke_with_store(r) for r in records):
        head, _, rate = cell.text.partition(" · ")
        return replace(cell, text=f"{head}, the lock's exclusion broken too · {rate}")  # the lock's failure
    if cell.mark is Mark.NOT_EXERCISED and unaffected:
        return replace(cell, mark=Mark.UNAFFECTED,
                       text=f"unaffected: {unaffected}; {cell.text.removeprefix(f'{NOT_EXERCISED} ')}")
    return cell


def against_previous(cell: Cell, before: Cell | None) -> Cell:
    """The cell marked ↯ with the previous reference's mark when the two marks differ; before is None where the
    previous reference had no trial of the cell."""
    if before is None or before.mark is cell.mark:
        return cell
    return replace(cell, text=f"{cell.text} {UNSTABLE} was {before.mark.value}", unstable=True, previous=before.mark)
