"""What one round of added trials gives each open cell, and which of its queued trials may still start.

Pure of servers and of the decision: a round is planned from the targets (lab/runner/settle_rule.py SettleTarget),
the records so far (a Ledger) and the clock, and run by the ordinary executors (lab/runner/trials.py,
lab/runner/events.py) through a SettleGate, which drops a queued trial the moment its cell meets its rule (a
deciding cell's first failure) or when it would no longer end before the deadline. So a deciding cell never gets a
trial started after its first failure is recorded, and no trial starts that its cell's usual duration would carry
past the time budget.

A round of a scenario whose trials each strike a fault of their own gives every open cell the trials its rule
still wants (StopRule.wanted), interleaved cell by cell as a plan's repetitions are; in a shared-event scenario
(FaultReach.ONE_EVENT) a round is one event per column, its subjects the cells of that column still open, so one
fault serves them all, and each column's rounds follow one another as soon as the last ended, its columns side by
side. Added trials continue each cell's trial index past every index the plan or the records
already hold, so every trial id stays unique and a resumed run finds the ones it already has in trials.jsonl.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from lab.checkers.outcomes import latest_per_trial
from lab.runner.records import TrialRecord
from lab.runner.settle_rule import Ended, Harm, SettleTarget, Tally
from scenarios.base import TrialSpec

Cell = tuple[str, str, str]  # (scenario, backend as its row names it, variant)


def cell_of(record_or_spec: dict | TrialSpec) -> Cell:
    """A record's or a planned trial's cell."""
    if isinstance(record_or_spec, TrialSpec):
        return record_or_spec.scenario, record_or_spec.label, record_or_spec.variant
    return record_or_spec["scenario"], record_or_spec["backend"], record_or_spec["variant"]


class Ledger:
    """One scenario's records by cell, the latest per trial id, kept current as its rounds append theirs."""

    def __init__(self, records: Iterable[dict] = ()):
        self._by_cell: dict[Cell, dict[str, dict]] = {}
        self._tallies: dict[Cell, dict[Harm, Tally]] = {}  # each cell's, until a record of it comes
        self.add(latest_per_trial(list(records)))

    def add(self, records: Iterable[dict | TrialRecord]) -> None:
        for record in records:
            cell = cell_of(dict(record))
            self._by_cell.setdefault(cell, {})[record["id"]] = dict(record)
            self._tallies.pop(cell, None)

    def records(self, cell: Cell) -> list[dict]:
        return list(self._by_cell.get(cell, {}).values())

    def all(self) -> list[dict]:
        return [r for records in self._by_cell.values() for r in records.values()]

    def tally(self, target: SettleTarget) -> Tally:
        known = self._tallies.setdefault(target.cell, {})
        if target.harm not in known:
            known[target.harm] = Tally.of(self.records(target.cell), target.harm)
        return known[target.harm]

    def ended(self, target: SettleTarget) -> Ended | None:
        return target.rule.ended(self.tally(target))

    def last_index(self, cell: Cell) -> int:
        """The highest trial index the cell's records hold (-1 for none)."""
        return max((r["index"] for r in self._by_cell.get(cell, {}).values()), default=-1)

    def seconds(self, cell: Cell) -> float | None:
        """The median duration of the cell's finished trials, or of its scenario's when it has none; None for
        neither."""
        for records in (self.records(cell), [r for c, rs in self._by_cell.items() if c[0] == cell[0]
                                             for r in rs.values()]):
            durations = [r["duration"] for r in records if r.get("status") == "ok" and r.get("duration")]
            if durations:
                return float(statistics.median(durations))
        return None


@dataclass(frozen=True)
class Templates:
    """How to make a cell's next trial: its planned spec (backend, driver, variant) and the highest index the plan
    gives the cell, so an added trial never takes an id the plan (a sequential-rule trial) could still use."""

    specs: dict[Cell, TrialSpec]
    planned_last: dict[Cell, int]

    @classmethod
    def of(cls, planned: Iterable[TrialSpec]) -> Templates:
        specs: dict[Cell, TrialSpec] = {}
        last: dict[Cell, int] = {}
        for spec in planned:
            cell = cell_of(spec)
            last[cell] = max(last.get(cell, -1), spec.index)
            if spec.skip is None:
                specs.setdefault(cell, spec)
        return cls(specs, last)

    def runnable(self, target: SettleTarget) -> bool:
        return target.cell in self.specs

    def first_added(self, cell: Cell) -> int:
        """The lowest index an added trial of the cell can have: past every index the plan gives it."""
        return self.planned_last.get(cell, -1) + 1

    def next_index(self, cell: Cell, ledger: Ledger) -> int:
        """The cell's next added trial's index: past the plan's and every recorded one."""
        return max(self.first_added(cell), ledger.last_index(cell) + 1)

    def spec(self, cell: Cell, index: int) -> TrialSpec:
        return replace(self.specs[cell], index=index)


def trial_round(targets: list[SettleTarget], ledger: Ledger, templates: Templates) -> list[TrialSpec]:
    """A round of a scenario whose trials strike a fault each: every open cell's wanted trials (StopRule.wanted),
    the cells interleaved (A B C A B C ...), so a round cut short by the deadline has spread its trials."""
    wanted = {t.cell: t.rule.wanted(ledger.tally(t)) for t in targets if templates.runnable(t)}
    first = {cell: templates.next_index(cell, ledger) for cell in wanted}
    return [templates.spec(cell, first[cell] + k) for k in range(max(wanted.values(), default=0))
            for cell, n in wanted.items() if k < n]


def event_round(targets: list[SettleTarget], ledger: Ledger, templates: Templates) -> list[TrialSpec]:
    """The rounds of a shared-event scenario's columns: per column (variant), as many events as its neediest open
    cell wants, each with every open cell of the column as a subject, at consecutive indices past every index any
    cell of that column holds (an event's subjects share its index). Run through a sequential SettleGate, each
    column's events go one after another, each with only the subjects the ones before left open, while the other
    columns' events run beside them."""
    by_variant: dict[str, list[SettleTarget]] = {}
    for target in targets:
        if templates.runnable(target) and target.rule.wanted(ledger.tally(target)):
            by_variant.setdefault(target.variant, []).append(target)
    rounds = {variant: max(t.rule.wanted(ledger.tally(t)) for t in members) for variant, members in by_variant.items()}
    first = {}
    for variant, members in by_variant.items():
        column = [c for c in templates.planned_last if c[0] == members[0].scenario and c[2] == variant]
        first[variant] = max(templates.next_index(cell, ledger) for cell in column + [t.cell for t in members])
    return [templates.spec(t.cell, first[variant] + k) for k in range(max(rounds.values(), default=0))
            for variant, members in by_variant.items() if k < rounds[variant] for t in members]


class SettleGate:
    """The added trials' gate for the executors (lab/runner/trials.py TrialGate): a queued trial starts only while
    its cell's rule is unmet and its cell's usual duration (Ledger.seconds, else `fallback_s`) still ends before the
    deadline. Every kept record goes into the ledger at once, so the next trial of a cell whose first failure just
    came is dropped, never started.

    sequential: a cell's next trial waits while one of its trials is in flight (a shared-event column's rounds: its
    next event starts with the subjects the last one left open)."""

    drops = True

    def __init__(self, targets: Iterable[SettleTarget], ledger: Ledger, deadline: float, fallback_s: float,
                 clock: Callable[[], float] = time.monotonic, sequential: bool = False):
        self.targets = {t.cell: t for t in targets}
        self.ledger, self.deadline, self.fallback_s, self.clock = ledger, deadline, fallback_s, clock
        self.sequential = sequential
        self.in_flight: dict[Cell, int] = {}

    def seconds(self, cell: Cell) -> float:
        found = self.ledger.seconds(cell)
        return self.fallback_s if found is None else found

    def fits(self, cell: Cell) -> bool:
        """Whether a trial of the cell started now would end before the deadline, at its usual duration."""
        return self.clock() + self.seconds(cell) <= self.deadline

    def needed(self, spec: TrialSpec) -> bool:
        target = self.targets.get(cell_of(spec))
        return target is not None and self.ledger.ended(target) is None and self.fits(target.cell)

    def later(self, spec: TrialSpec) -> bool:
        return self.sequential and self.in_flight.get(cell_of(spec), 0) > 0

    def started(self, spec: TrialSpec) -> None:
        cell = cell_of(spec)
        self.in_flight[cell] = self.in_flight.get(cell, 0) + 1

    def kept(self, record: TrialRecord) -> None:
        cell = cell_of(dict(record))
        self.in_flight[cell] = max(0, self.in_flight.get(cell, 0) - 1)
        self.ledger.add([record])

    def due(self) -> bool:
        return True  # the deadline comes closer with every pass
