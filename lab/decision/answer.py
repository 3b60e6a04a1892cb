"""The answer, computed once: for each need, the lock to use, the rule that ranked it first, the runner-up and what
separates them, its weakest deciding cell, and what would change the answer; then the locks to avoid.

REPORT.md, report.html (for every stack its panel offers) and `lab doctor --advise` render this value; none of
them decides anything of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from lab.decision.cells import Cell
from lab.decision.compare import Adoption, Comparison, Rule, compare
from lab.decision.grid import Grid
from lab.decision.harm import Harm
from lab.decision.needs import NEEDS, Need, promises_exclusion
from lab.decision.standing import Outcome, Standing, outcome_of
from lab.decision.strength import CONFIDENCE, STRONG_AT_MOST, STRONG_TRIALS
from lab.decision.where import declared, where_of
from lab.declarations.post_role import PostRole

MOST_CHANGES = 5  # "what would change the answer": at most this many items, the weakest first


@dataclass(frozen=True)
class Change:
    """One thing that would change the answer: a fault, the lock's cell there, and what it would take."""

    label: str
    cell: Cell
    takes: str
    more: int | None = None  # for a weak ✓: how many more trials without a failure make it strong


@dataclass(frozen=True)
class NeedAnswer:
    """One need's answer. choice is None when no candidate qualifies (closest then names the nearest)."""

    need: Need
    title: str
    comparison: Comparison
    candidates: tuple[str, ...]
    choice: str | None = None
    rule: Rule | None = None  # what put the choice ahead of the runner-up (None: it was the only one)
    runner_up: str | None = None
    weakest: tuple[str, Cell] | None = None
    changes: tuple[Change, ...] = ()
    closest: str | None = None
    ruled_out: dict[str, str] = field(default_factory=dict)  # candidate -> the first fault that failed it

    @property
    def ranked(self) -> list[Standing]:
        return self.comparison.ranked()


@dataclass(frozen=True)
class Avoid:
    """A lock no need can use, and the first fault that rules it out (read for the surviving company)."""

    backend: str
    label: str
    cell: Cell
    more: int  # further faults that failed it


@dataclass(frozen=True)
class Decision:
    needs: tuple[NeedAnswer, ...]
    avoid: tuple[Avoid, ...]

    def answer_for(self, need: Need) -> NeedAnswer | None:
        return next((a for a in self.needs if a.need == need), None)


def can_serve(need: Need, meta: dict, backend: str) -> bool:
    """Whether a backend can serve a need at all, by what the run's meta.json says it declares: a lock (it promises
    exclusion) that the need admits."""
    where = where_of(meta, backend)
    caps = frozenset(declared(meta, "capabilities", backend) or ())
    return where is not None and promises_exclusion(caps) and need.serves(caps, where)


def adoption_of(meta: dict, backends: list[str]) -> dict[str, Adoption]:
    """What adopting each lock takes (compare.py Adoption), from the run's meta.json: its declared post role (the
    post's fix, method 4) and whether it is a third-party library's."""
    out: dict[str, Adoption] = {}
    for backend in backends:
        if declared(meta, "post_roles", backend) == PostRole.METHOD_4.value:
            out[backend] = Adoption.POSTS_FIX
        elif declared(meta, "libraries", backend) is not None:
            out[backend] = Adoption.LIBRARY
        else:
            out[backend] = Adoption.OWN_CODE
    return out


def need_title(need: Need, meta: dict, candidates: list[str]) -> str:
    """The need's heading; the lock services one names are the ones its candidates declare."""
    if not need.names_services:
        return need.title
    services = sorted({w.lock for b in candidates if (w := where_of(meta, b)) is not None})
    return f"{need.title} ({', '.join(services)})" if services else need.title


def trials_to_strong(cell: Cell) -> int:
    """How many more exercised trials without a failure would bring a ✓ to the declared bound."""
    needed = math.ceil(math.log(1 - CONFIDENCE) / math.log(1 - STRONG_AT_MOST))
    return max(STRONG_TRIALS, needed) - cell.exercised


def changes_for(comparison: Comparison, backend: str) -> tuple[Change, ...]:
    """What would change the answer, at most MOST_CHANGES, in this order: its weak deciding ✓ cells (a failure
    there, or more trials to make them strong), the faults it is unknown under, and those that struck without
    taking its right away."""
    s = comparison.standings[backend]
    deciding = comparison.deciding(backend)
    weak = sorted(((label, s.cells[label]) for label in deciding if not s.cells[label].strong),
                  key=lambda lc: -(lc[1].bound or 1.0))
    found = [Change(label, cell, f"a failure there; {trials_to_strong(cell)} more trials without one make it strong",
                    trials_to_strong(cell)) for label, cell in weak]
    found += [Change(label, s.cells[label], "a run of it: the lab has no verdict there")
              for label in s.faults(Outcome.UNKNOWN)]
    found += [Change(label, s.cells[label], "a trial where it takes the right away")
              for label in s.faults(Outcome.NOT_EXERCISED)]
    return tuple(found[:MOST_CHANGES])


def decide_need(need: Need, grid: Grid, candidates: list[str]) -> NeedAnswer | None:
    """One need's answer over the candidates that can serve it, or None when none can."""
    able = [b for b in candidates if can_serve(need, grid.meta, b)]
    if not able:
        return None
    rows = {b: grid.row(need.harm, b) for b in able}
    services = {b: len(w.services()) for b in able if (w := where_of(grid.meta, b)) is not None}
    comparison = compare(rows, able, services, grid.costs, adoption_of(grid.meta, able))
    title = need_title(need, grid.meta, able)
    ruled_out = {b: s.faults(Outcome.FAILED)[0] for b, s in comparison.standings.items() if s.count(Outcome.FAILED)}
    ranked = comparison.ranked()
    if not ranked:
        closest = comparison.closest()
        return NeedAnswer(need, title, comparison, tuple(able), closest=closest.backend if closest else None,
                          ruled_out=ruled_out)
    best = ranked[0].backend
    runner_up = ranked[1].backend if len(ranked) > 1 else None
    rule = comparison.separated_by(best, runner_up) if runner_up else None
    return NeedAnswer(need, title, comparison, tuple(able), best, rule, runner_up, comparison.weakest(best),
                      changes_for(comparison, best), ruled_out=ruled_out)


def decide(grid: Grid, candidates: list[str] | None = None) -> Decision:
    """Every need's answer, and the locks to avoid: those that qualify for no need they can serve and failed under
    the surviving company's harm (a loss the control suffered the same way is the store's, never a reason)."""
    if candidates is None:
        candidates = [b for b in grid.backends if b != grid.control and "@" not in b]  # driver rows apart
    answers = [a for need in NEEDS if (a := decide_need(need, grid, candidates)) is not None]
    qualified = {s.backend for a in answers for s in a.ranked}
    avoid = []
    for backend in candidates:
        if backend in qualified:
            continue
        failed = [(label, cell) for label, cell in grid.row(Harm.SURVIVING_COMPANY, backend).items()
                  if outcome_of(cell) is Outcome.FAILED]
        if failed:
            avoid.append(Avoid(backend, failed[0][0], failed[0][1], len(failed) - 1))
    return Decision(tuple(answers), tuple(avoid))


def deciding_cells(decision: Decision) -> set[tuple[str, str]]:
    """(backend, fault label) of every cell the answer depends on: for each need, every candidate under each fault
    that failed any of them. More trials there can move a lock in or out of a recommendation (issue 56)."""
    return {(backend, label) for answer in decision.needs for label in answer.comparison.failed_by
            for backend in answer.candidates}
