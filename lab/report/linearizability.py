"""The linearizability search beside the exclusion checker: what it ordered, what it found, and whether the two agreed.

Why: judge() composes the bounded Wing–Gong search (lab/checkers/linearizable.py) with the other checkers, and a
history it finds no mutex is a lost lock, as the exclusion checker's comparison of intervals finds one: where the
two disagree the worse answer decides. So the matrix appendix says how many trials the search ordered, how many it
found not linearizable, where it agreed with the exclusion checker and where not (computed, never claimed), and how
many histories gave it nothing to order (locks inside the write, no lock): there it says unknown, which changes no
verdict. Which histories had nothing to order is read from the history itself (`mutex_ops`), so a run recorded
before the search said unknown there renders the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.checkers import ops
from lab.checkers.linearizable import CHECKER, mutex_ops
from lab.checkers.outcomes import judgement_of
from lab.checkers.verdict import Valid
from lab.report.common import FLAG
from lab.report.sections import MATRIX, RunView, section

EXCLUSION = "exclusion"  # judge.exclusion's checker: the lock as a mutex, by its intervals


@dataclass
class Tally:
    """What the search did over a run's judged trials."""

    judged: int = 0  # trials whose verdict carries the search's finding
    nothing_to_order: int = 0  # their histories had no run-level acquire or release
    ordered: int = 0  # the search answered true or false
    not_linearizable: int = 0
    bound: int = 0  # it reached its bound: unknown
    disagreed: list[str] = field(default_factory=list)  # ordered trials where the exclusion checker answered otherwise


def tally(records: list[dict]) -> Tally:
    """The search's answers over finished judged trials, each against the exclusion checker's on the same verdict."""
    found = Tally()
    for record in records:
        judgement = judgement_of(record)
        if record.get("status") != "ok" or judgement is None or not record.get("history"):
            continue
        findings = {f["checker"]: Valid(f["valid"]) for f in judgement.get("findings") or () if "checker" in f}
        search = findings.get(CHECKER)
        if search is None:
            continue
        found.judged += 1
        if not mutex_ops(ops.from_json(record["history"])):
            found.nothing_to_order += 1
        elif search is Valid.UNKNOWN:
            found.bound += 1
        else:
            found.ordered += 1
            found.not_linearizable += search is Valid.FALSE
            exclusion = findings.get(EXCLUSION)
            if exclusion is None or exclusion is not search:
                found.disagreed.append(str(record["id"]))
    return found


def _trials(n: int) -> str:
    return "1 trial" if n == 1 else f"{n} trials"


def agreement(found: Tally) -> str:
    """'it agreed with the exclusion checker in every one', or which trials it did not (the worse answer decides)."""
    if not found.ordered:
        return ""
    if not found.disagreed:
        return "; it agreed with the exclusion checker in every one of them"
    shown = ", ".join(f"`{t}`" for t in found.disagreed[:10]) + (", ..." if len(found.disagreed) > 10 else "")
    return (f"; {FLAG} it disagreed with the exclusion checker in {len(found.disagreed)} of them, where the worse "
            f"answer decides: {shown}")


@section(21, file=MATRIX)
def section_linearizability(run: RunView) -> str | None:
    found = tally(run.frame.to_dict("records"))
    if not found.judged:
        return None
    return "\n".join([
        "## The linearizability search beside the exclusion checker", "",
        "Every judged trial's history also goes through a bounded Wing–Gong search for the mutex model "
        "(`lab/checkers/linearizable.py`): Jepsen's question, whether some order of the run-level acquires and "
        "releases, each hold ending where its holder stopped believing in it, is one a mutex allows, with "
        "indeterminate operations ordered or left out as they may have been. Its finding is composed with the "
        "others, so a history it finds no mutex is a lost lock, as one the exclusion checker finds by comparing "
        f"intervals. Of {_trials(found.judged)} judged here, it ordered {found.ordered} and found "
        f"{found.not_linearizable} not linearizable{agreement(found)}."
        + (f" {_trials(found.bound)} reached its bound (unknown)." if found.bound else "")
        + (f" {_trials(found.nothing_to_order)} had no run-level acquire or release to order (a lock inside the "
           "write, or none): it says unknown there, which changes no verdict; theirs rest on the write and company "
           "checkers." if found.nothing_to_order else ""), ""])
