"""The answer for one stack (lab/stack/description.py), from a run's folder: the faults it is exposed to, for each need the locks
that kept their promise under exactly those faults, what fails the lock in use and the smallest change that fixes
it, and the store findings that concern it.

Which columns can happen to the stack comes from each column's declaration (lab/stack/exposure.py, recorded in
meta.json), evaluated per lock over the services its lock, fence and writes live on (lab/declarations/where.py). A column that
cannot happen to a lock on this stack is n/a for that lock, and the decision page's own model does the rest
(lab/decision: the same grid, masked for the stack, and the same decide()): nothing here ranks locks by a rule of its
own, and nothing names a column or a backend.
"""

from __future__ import annotations

import typing
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from pathlib import Path

from lab.declarations.columns import Column
from lab.errors import LabError
from lab.stack.exposure import Answer, Happens, Setting, Trait, When, happens, read_trait
from lab.report.banner import why_not_the_reference
from lab.report.common import declaration
from lab.decision.answer import adoption_of, decide
from lab.decision.compare import Comparison, compare
from lab.decision.grid import CANNOT_HAPPEN, Grid
from lab.decision.harm import Harm
from lab.decision.needs import NEEDS, Need, promises_exclusion
from lab.decision.standing import Outcome, Standing, outcome_of
from lab.decision.where import where_of
from lab.report.decide import can_serve, cost_sentence, grid_of, verdict_sentence
from lab.report.declared import Declared, Happening, conditions_of
from lab.report.matrix import MatrixCell, control_of, declared_run, matrix_rows
from lab.report.meta import provenance_runs
from lab.report.sections import MAIN, RunView
from lab.decision.cells import store_losses
from lab.report.store_findings import StoreFinding, acknowledged, store_findings
from lab.records.results import RunFolder
from lab.stack.description import Stack, Unknown



# --- what the advice says, typed ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Exposure:
    """A fault column this stack is exposed to (happens yes), or may be (unknown: a fact it depends on is)."""

    scenario: str
    variant: str
    label: str
    happens: Happens
    unknown: tuple[str, ...]  # "<what the condition needs>: <why that fact is unknown>"
    declared: Declared


@dataclass(frozen=True)
class RuledOut:
    """A column that cannot happen to this stack, and the condition the stack does not meet."""

    scenario: str
    variant: str
    label: str
    because: str


@dataclass(frozen=True)
class Kept:
    """A lock that qualified for a need over the stack's faults, with the evidence behind it."""

    backend: str
    summary: str | None
    faults_kept: int
    exercised_trials: int  # behind its ✓ cells
    weakest: str | None  # its deciding ✓ with the highest bound
    weakest_n: int
    bound: float | None  # that ✓'s 95 % upper bound of its failure rate
    strong: bool  # its weakest deciding ✓ meets the declared bound
    unknown: tuple[str, ...]
    store: tuple[str, ...]  # faults under which the store lost writes whatever the lock (◆)
    cost: str


@dataclass(frozen=True)
class NeedAnswer:
    need: str
    why: str
    candidates: int
    faults: int  # the stack's fault columns any candidate faced
    qualifying: tuple[Kept, ...]
    unproven: tuple[tuple[str, tuple[str, ...]], ...]  # (backend, faults that failed another it has no answer to)
    verdict: str  # the decision page's words for this need, over these faults


@dataclass(frozen=True)
class Failure:
    scenario: str
    variant: str
    label: str
    cell: str
    happens: Happens
    unknown: tuple[str, ...]


class FixKind(str, Enum):
    SETTING = "setting"
    LOCK = "lock"


@dataclass(frozen=True)
class Fix:
    """A change after which the lock in use (a setting) or another lock fails no fault the stack is exposed to."""

    kind: FixKind
    change: str  # what to do, in words
    backend: str  # the lock after the change
    trait: str | None = None  # a setting's trait and value
    value: str | None = None
    removes: tuple[str, ...] = ()  # fault columns the change takes away from the stack
    adds: tuple[str, ...] = ()  # and those it brings
    same_services: bool = True  # a lock whose lock, fence and writes live where the one in use's do
    where: str = ""  # where its lock, fence and writes live, in words (lab/declarations/where.py)
    needs: tuple[str, ...] = ()  # the needs it serves of those the lock in use serves
    evidence: str = ""


@dataclass(frozen=True)
class LockAnswer:
    backend: str
    row: str  # the matrix row judged (its driver's, when the run has one for the stack's driver)
    fails: tuple[Failure, ...]
    store: tuple[str, ...]
    unknown: tuple[str, ...]
    kept: int
    fixes: tuple[Fix, ...]
    untested: tuple[str, ...] = ()  # faults that never took its right away (○) but failed another lock here
    note: str | None = None


@dataclass(frozen=True)
class Measured:
    """The same fault in another configuration, as the run measured it beside a store finding."""

    variant: str
    label: str
    needs: tuple[str, ...]  # what that configuration has that the finding's has not, in words
    stack_has_it: Happens
    control_trials: int
    control_acknowledged: int  # writes the control's trials had acknowledged
    control_lost: int  # the control's trials that lost one
    locks_ran: int
    locks_lost: int  # the locks with a trial there that lost an acknowledged write

    @property
    def kept_every_write(self) -> bool:
        """Writes were acknowledged under it and none was lost: a remedy shown, not one that merely lost nothing."""
        return self.control_acknowledged > 0 and not self.control_lost and not self.locks_lost


@dataclass(frozen=True)
class StoreAnswer:
    scenario: str
    variant: str
    label: str
    lost: int
    n: int
    happens: Happens
    unknown: tuple[str, ...]
    store: tuple[str, ...]
    broken: tuple[str, ...]
    measured_otherwise: tuple[Measured, ...]


@dataclass(frozen=True)
class Advice:
    run: str
    stack: dict
    unknown_facts: tuple[tuple[str, str], ...]
    services: tuple[str, ...]
    left_out: tuple[str, ...]  # the run's locks that need a service this stack does not describe
    exposed: tuple[Exposure, ...]
    ruled_out: tuple[RuledOut, ...]
    needs: tuple[NeedAnswer, ...]
    lock: LockAnswer | None
    lock_note: str | None
    store: tuple[StoreAnswer, ...]
    undeclared: int = 0  # columns neither the run nor this lab declared stacks for: taken to happen everywhere
    not_the_reference: tuple[str, ...] = ()  # why the runs answering are not one clean run (lab/report/banner.py)

    @property
    def lock_fails(self) -> bool:
        return self.lock is not None and bool(self.lock.fails)

    def to_json(self) -> dict:
        return _plain(asdict(self)) | {"lock_fails": self.lock_fails}


def _plain(value):
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# --- the stack's view of the run's matrix -------------------------------------------------------------------------

@dataclass
class StackView:
    """The run's matrix as this stack sees it: each lock's cells, those that cannot happen to it made n/a."""

    run: RunView
    stack: Stack
    columns: list[tuple[str, Column]]  # (scenario, Column), in the matrix's order
    conditions: list[Happening]
    rows: dict[str, list[MatrixCell]]
    control: str | None
    services: dict[str, frozenset[str]] = field(default_factory=dict)
    costs: dict[str, str] = field(default_factory=dict)

    def cost(self, backend: str) -> str:
        """cost_sentence, once per backend: it filters the run's frame each time."""
        if backend not in self.costs:
            self.costs[backend] = cost_sentence(self.run.frame, self.run.meta, backend)
        return self.costs[backend]

    @classmethod
    def of(cls, run: RunView, stack: Stack) -> StackView:
        columns = [(scenario, column) for scenario, column in declared_run(run)]
        conditions = [conditions_of(scenario, column) for scenario, column in columns]
        rows = dict(matrix_rows(run))
        services = {b: w.services() for b in rows if (w := where_of(run.meta, b)) is not None}
        return cls(run, stack, columns, conditions, rows, control_of(run.frame), services)

    def answer(self, backend: str, i: int, changed: dict[Trait, str] | None = None) -> Answer:
        declared = self.conditions[i]
        return happens(declared.conditions, self.stack, self.services.get(backend, frozenset()), changed,
                       declared.strikes)

    def masked(self, backend: str, changed: dict[Trait, str] | None = None) -> list[MatrixCell]:
        return [cell if self.answer(backend, i, changed).happens is not Happens.NO else replace(cell, cell=CANNOT_HAPPEN)
                for i, cell in enumerate(self.rows[backend])]

    def runnable(self) -> list[str]:
        """The run's locks (not the control, not a driver's row, not a strategy that promises no exclusion) whose
        every service this stack describes."""
        have = self.stack.services()
        return [b for b in self.rows if b != self.control and "@" not in b and b in self.services
                and self.services[b] <= have
                and promises_exclusion(frozenset(declaration(self.run.meta, "capabilities", b) or ()))]

    def masked_rows(self, backends: list[str], changed: dict[Trait, str] | None = None) -> dict[str, list[MatrixCell]]:
        return {b: self.masked(b, changed) for b in backends}

    def grid(self, backends: list[str]) -> Grid:
        """The run's decision grid (every harm) with the columns that cannot happen to these locks made n/a."""
        hidden = {b: {i for i in range(len(self.columns)) if self.answer(b, i).happens is Happens.NO} for b in backends}
        return grid_of(self.run).masked(hidden)

    def comparison(self, backends: list[str]) -> Comparison:
        """These locks compared over the stack's faults, read for the surviving company (the lab's writes live in
        the database), as the decision compares a need's candidates."""
        grid = self.grid(backends)
        rows = {b: grid.row(Harm.SURVIVING_COMPANY, b) for b in backends}
        services = {b: len(w.services()) for b in backends if (w := where_of(self.run.meta, b)) is not None}
        return compare(rows, backends, services, grid.costs, adoption_of(self.run.meta, backends))


def _unknown_words(answer: Answer) -> tuple[str, ...]:
    return tuple(f"{condition.words()}: {why}" for condition, why in answer.unknown)


def exposures(view: StackView) -> tuple[list[Exposure], list[RuledOut]]:
    """The columns that can happen to the stack: those that can happen to a lock it can run (the control included)
    or to the lock in use, whose cell is not n/a by the lock's own declaration; and the columns ruled out, with the
    condition unmet."""
    lock = view.stack.lock
    faced = [b for b in view.rows if b in view.services and (b == lock or "@" not in b
                                                             and view.services[b] <= view.stack.services())]
    exposed, ruled_out = [], []
    for i, (scenario, column) in enumerate(view.columns):
        answers = [view.answer(b, i) for b in faced
                   if outcome_of(view.rows[b][i].cell) is not Outcome.NOT_APPLICABLE]
        if not answers:
            continue  # it reaches no lock this stack can run
        best = next((a for level in (Happens.YES, Happens.UNKNOWN) for a in answers if a.happens is level), None)
        if best is None:
            because = next(a.ruled_out_by[0] for a in answers if a.ruled_out_by)
            ruled_out.append(RuledOut(scenario, column.variant, column.label, because))
            continue
        exposed.append(Exposure(scenario, column.variant, column.label, best.happens, _unknown_words(best),
                                view.conditions[i].declared))
    return exposed, ruled_out


# --- for each need ------------------------------------------------------------------------------------------------

def _kept(s: Standing, comparison: Comparison, view: StackView) -> Kept:
    weakest = comparison.weakest(s.backend)
    return Kept(s.backend, declaration(view.run.meta, "summaries", s.backend), s.count(Outcome.KEPT), s.kept_trials,
                weakest[0] if weakest else None, weakest[1].exercised if weakest else 0,
                weakest[1].bound if weakest else None, not comparison.weak(s.backend), tuple(s.faults(Outcome.UNKNOWN)),
                tuple(s.faults(Outcome.STORE)), view.cost(s.backend))


def need_answers(view: StackView) -> list[NeedAnswer]:
    """Each need's answer over the stack's faults: the decision (lab/decision/answer.py) over the locks the stack can
    run, on the run's grid with what cannot happen to the stack made n/a."""
    runnable = view.runnable()
    if not runnable:
        return []
    decision = decide(view.grid(runnable), runnable)
    out = []
    for answer in decision.needs:
        comparison = answer.comparison
        qualified = {s.backend for s in answer.ranked}
        unproven = tuple((b, tuple(comparison.unproven(b))) for b in answer.candidates
                         if b not in qualified and comparison.unproven(b) and b not in answer.ruled_out)
        out.append(NeedAnswer(answer.title, answer.need.why, len(answer.candidates), comparison.faced,
                              tuple(_kept(s, comparison, view) for s in answer.ranked), unproven,
                              verdict_sentence(answer, view.run.meta)))
    return out


def _serves(need: Need, meta: dict, backend: str) -> bool:
    return can_serve(need, meta, backend)


# --- the lock in use ----------------------------------------------------------------------------------------------

def _row_of(view: StackView, lock: str) -> str:
    """The matrix row for the lock in use: its driver's row when the run has one for the stack's driver."""
    driver = view.stack.client.driver
    if isinstance(driver, str) and f"{lock}@{driver}" in view.rows:
        return f"{lock}@{driver}"
    return lock


def _failures(view: StackView, row: str, changed: dict[Trait, str] | None = None) -> list[Failure]:
    found = []
    for i, cell in enumerate(view.masked(row, changed)):
        if outcome_of(cell.cell) is Outcome.FAILED:
            answer = view.answer(row, i, changed)
            found.append(Failure(cell.scenario, cell.variant, cell.label, cell.cell.text, answer.happens,
                                 _unknown_words(answer)))
    return found


def _exposed_labels(view: StackView, backend: str, changed: dict[Trait, str] | None = None) -> set[str]:
    return {view.columns[i][1].label for i in range(len(view.columns))
            if view.answer(backend, i, changed).happens is not Happens.NO
            and outcome_of(view.rows[backend][i].cell) is not Outcome.NOT_APPLICABLE}


def _settings_for(trait: Trait) -> list[tuple[Trait, str, Setting]]:
    """The settings that give this trait a value: its own, and another trait's that sets it too (also)."""
    found = [(trait, value, setting) for value, setting in trait.info.settable.items()]
    for other in Trait:
        found += [(other, value, setting) for value, setting in other.info.settable.items()
                  if other is not trait and any(t is trait for t, _ in setting.also)]
    return found


def setting_fixes(view: StackView, row: str, failing: list[Failure]) -> list[Fix]:
    """Each setting of a trait a failing column depends on (lab/stack/exposure.py's Setting): a fix when, with it, the lock
    in use fails nothing it faces and keeps at least one fault."""
    labels = {f.label for f in failing}
    traits = []
    for i, (_, column) in enumerate(view.columns):
        conditions = view.conditions[i].conditions
        if column.label in labels and conditions:
            traits += [c.trait for c in conditions if c.trait.info.service in view.services.get(row, frozenset())]
    tried = set()
    fixes = []
    before = _exposed_labels(view, row)
    for trait, value, setting in [s for t in dict.fromkeys(traits) for s in _settings_for(t)]:
        if (trait, value) in tried or read_trait(view.stack, trait) == value:
            continue
        tried.add((trait, value))
        if setting.unless is not None and read_trait(view.stack, setting.unless[0]) == setting.unless[1]:
            continue
        changed = {trait: value, **dict(setting.also)}
        cells = view.masked(row, changed)
        if any(outcome_of(c.cell) is Outcome.FAILED for c in cells) or \
                not any(outcome_of(c.cell) is Outcome.KEPT for c in cells):
            continue
        after = _exposed_labels(view, row, changed)
        fixes.append(Fix(FixKind.SETTING, setting.how, row, trait.value, value, tuple(sorted(before - after)),
                         tuple(sorted(after - before)),
                         evidence=f"then `{row}` fails none of the faults the stack is exposed to"))
    return fixes


def _needs_of(meta: dict, backend: str) -> list[str]:
    return [need.title for need in NEEDS if _serves(need, meta, backend)]


def lock_fixes(view: StackView, lock: str) -> list[Fix]:
    """The locks this stack can run that qualify over its faults, nearest to the lock in use first: the same
    services, then the most of its needs served, then the lab's own strategies before a library's (a change in your
    code, not a new dependency), then the most capabilities shared and the fewest apart, then the evidence."""
    meta = view.run.meta
    pool = view.runnable()
    comparison: Comparison = view.comparison(pool) if pool else Comparison({})
    mine = where_of(meta, lock)
    caps = frozenset(declaration(meta, "capabilities", lock) or ())
    wanted = _needs_of(meta, lock)
    found = []
    for backend in pool:
        if backend == lock or not comparison.qualifies(backend):
            continue
        theirs = frozenset(declaration(meta, "capabilities", backend) or ())
        served = tuple(n for n in _needs_of(meta, backend) if n in wanted)
        s = comparison.standings[backend]
        weakest = comparison.weakest(backend)
        evidence = (f"kept {s.count(Outcome.KEPT)} faults on {s.kept_trials} exercised trials"
                    + (f", its weakest ✓ {weakest[0]} (n={weakest[1].exercised}, ≤{(weakest[1].bound or 1) * 100:.0f}%)"
                       if weakest else "")
                    + f"; cost {view.cost(backend)}")
        summary = declaration(meta, "summaries", backend)
        theirs_where = where_of(meta, backend)
        fix = Fix(FixKind.LOCK, f"use `{backend}`" + (f" ({summary})" if summary else ""), backend,
                  same_services=theirs_where == mine, where=theirs_where.describe() if theirs_where else "",
                  needs=served, evidence=evidence)
        library = declaration(meta, "libraries", backend) is not None
        found.append((fix, (library, -len(caps & theirs), len(caps ^ theirs), comparison.rank_key(backend, [backend]))))
    found.sort(key=lambda f: (not f[0].same_services, -len(f[0].needs), f[1], f[0].backend))
    return [fix for fix, _ in found]


def lock_answer(view: StackView) -> tuple[LockAnswer | None, str | None]:
    lock = view.stack.lock
    if isinstance(lock, Unknown):
        return None, f"the lock in use is unknown: {lock.why}"
    if lock is None:
        return None, "the stack uses no lock"
    row = _row_of(view, lock)
    if row not in view.rows:
        choices = ", ".join(b for b in view.rows if "@" not in b)
        raise LabError(f"the lock in use, {lock!r}, has no row in this run; choose from: {choices}")
    note = None
    missing = view.services.get(row, frozenset()) - view.stack.services()
    if missing:
        note = (f"it uses {', '.join(sorted(missing))}, which this stack description leaves out: every fault there "
                "is counted as possible")
    failing = _failures(view, row)
    pool = [b for b in view.runnable() if b != row] + [row]
    comparison = view.comparison(pool)
    standing = comparison.standings[row]
    failed_elsewhere = comparison.failed_by
    untested = tuple(label for label in standing.faults(Outcome.NOT_EXERCISED) if failed_elsewhere.get(label))
    fixes: list[Fix] = []
    if failing:
        fixes = setting_fixes(view, row, failing) + lock_fixes(view, lock)
    return LockAnswer(lock, row, tuple(failing), tuple(standing.faults(Outcome.STORE)),
                      tuple(standing.faults(Outcome.UNKNOWN)), standing.count(Outcome.KEPT), tuple(fixes), untested,
                      note), None


# --- store findings -----------------------------------------------------------------------------------------------

def measured(view: StackView, j: int, own: set[When]) -> Measured:
    """What the run measured under column j, a sibling of a store finding whose own conditions are `own`."""
    control = view.rows[view.control][j] if view.control else None
    ran = [row[j] for b, row in view.rows.items() if b != view.control and "@" not in b and row[j].cell.n]
    theirs = view.conditions[j].conditions or ()
    column = view.columns[j][1]
    return Measured(column.variant, column.label, tuple(c.words() for c in theirs if c not in own),
                    view.answer(view.control, j).happens if view.control else Happens.UNKNOWN,
                    control.cell.n if control else 0, acknowledged(control) if control else 0,
                    store_losses(control.records) if control else 0, len(ran),
                    sum(1 for c in ran if store_losses(c.records)))


def store_columns(view: StackView) -> list[tuple[int, StoreFinding, list[int]]]:
    """The run's store findings, whatever the stack: each with its column's index and those of the other
    configurations of the same fault the run measured (same_fault_as)."""
    if view.control is None:
        return []
    index = {(scenario, column.variant): i for i, (scenario, column) in enumerate(view.columns)}
    root = [view.conditions[j].same_fault_as or column.variant for j, (_, column) in enumerate(view.columns)]
    out = []
    for finding in store_findings(view.run, view.rows, view.columns):
        i = index[(finding.scenario, finding.variant)]
        out.append((i, finding, [j for j, (scenario, _) in enumerate(view.columns)
                                 if j != i and scenario == finding.scenario and root[j] == root[i]]))
    return out


def store_answers(view: StackView) -> list[StoreAnswer]:
    """The run's store findings whose fault can happen to this stack's store, each with the other configurations of
    the same fault the run measured (same_fault_as), what those have that the finding's has not, and what they lost."""
    out = []
    for i, finding, siblings in store_columns(view):
        answer = view.answer(typing.cast(str, view.control), i)
        if answer.happens is Happens.NO:
            continue
        own = set(view.conditions[i].conditions or ())
        out.append(StoreAnswer(finding.scenario, finding.variant, finding.label, finding.lost, finding.n,
                               answer.happens, _unknown_words(answer), finding.store, finding.broken,
                               tuple(measured(view, j, own) for j in siblings)))
    return out


# --- the whole answer ---------------------------------------------------------------------------------------------

CHECKOUT = Path(__file__).resolve().parents[2]


def reference_folders(checkout: Path = CHECKOUT) -> list[RunFolder]:
    """The committed reference: the runs REPORT.md's Provenance table names, from the checkout's results folder."""
    report = checkout / MAIN
    if not report.is_file():
        raise LabError(f"no committed reference here ({report} is missing): name a run, e.g. lab report --stack FILE RUN")
    runs = provenance_runs(report.read_text())
    if not runs:
        raise LabError(f"{report} names no run in its Provenance table: name a run instead")
    return [RunFolder.open(checkout / "results", run) for run in runs]


def advise(run: RunView, stack: Stack) -> Advice:
    view = StackView.of(run, stack)
    exposed, ruled_out = exposures(view)
    have = stack.services()
    left_out = tuple(b for b in view.rows if b != view.control and "@" not in b and b in view.services
                     and not view.services[b] <= have)
    lock, note = lock_answer(view)
    undeclared = sum(1 for c in view.conditions if c.declared is Declared.NOWHERE)
    return Advice(run.run_id, stack.to_json(), tuple(stack.unknowns()), tuple(sorted(have)), left_out,
                  tuple(exposed), tuple(ruled_out), tuple(need_answers(view)), lock, note,
                  tuple(store_answers(view)), undeclared, tuple(why_not_the_reference(run)))


__all__ = ["advise", "Advice", "StackView", "reference_folders"]
