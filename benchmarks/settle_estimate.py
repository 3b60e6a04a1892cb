"""How long would `lab run --settle` take on a saved reference? Per deciding column, from its trials' durations.

Usage: python benchmarks/settle_estimate.py [RUN] [--previous RUN ...] [--budget-minutes 31] [--results results]
                                            [--event-seconds S]

It selects the cells to settle as the run would after its planned trials (lab/runner/settle_cells.py, against the
previous references given), and for each open cell the trials its rule wants if every added trial goes the cell's
usual way (StopRule.wanted: at the share of its trials that were exercised so far, no failure; a cell that fails
needs fewer). A column of one-trial faults costs its trials' median durations shared among the trials its scenario
ran at once in that run (meta.json bounds: at_once); a shared-event column (FaultReach.ONE_EVENT) costs one event per
round, as many rounds as its neediest cell, its scenario's columns running at_once events side by side. Scenarios
are composed into the run's lanes as the runner lays them out (lab/runner/lanes.py composed: the run's-server ones
in two lanes, own-server ones in two beside them, alone ones after), which is what the settle phase does, alone ones
first. The durations are the reference's own, on its machine (2 cores), under that run's load; --event-seconds S
puts S seconds in place of every shared event's measured median (a Patroni event's floor is about 23 s, its
measured wall in the reference 38 to 78 s with 38 subjects on two cores).

A deciding cell cannot reach the bound when its rule stops it first: never exercised (it stops after 10 trials), or
exercised so rarely that 20 exercised trials would take more than 40 trials in all (the table gives the trials past
40 they would need at their share, and their minutes).
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import backends
import scenarios
from lab.checkers.outcomes import latest_per_trial
from lab.report import declared
from lab.report.sections import RunView
from lab.records.results import RunFolder
from lab.runner.lanes import OWN_SERVER_LANES, SHARED_LANES, composed, schedule
from lab.runner.settle_cells import cells_to_settle
from lab.runner.settle_rule import AT_MOST, Tally, Why, clean_bound, trials_for_bound
from scenarios.base import FaultReach

REFERENCE = "20261204-222637-478b"
EARLIER = ("20261204-122939-2d82", "20261204-185504-98af")


@dataclass
class Column:
    scenario: str
    variant: str
    event: bool
    cells: int = 0  # targets
    open: int = 0  # targets whose rule is not met yet
    trials: int = 0  # trials (subjects) to add
    rounds: int = 0  # an event column's events
    never: int = 0  # open deciding cells never exercised: the rule stops them after 10 trials
    rare: int = 0  # open deciding cells exercised too rarely to make 20 exercised within 40 trials
    rare_trials: int = 0  # what those would need past 40 to reach the bound at their share
    rare_seconds: float = 0.0
    seconds_each: list[float] = field(default_factory=list)
    trial_seconds: float = 0.0  # trials x their median durations (one-trial columns)
    flipped: int = 0

    @property
    def median(self) -> float:
        return statistics.median(self.seconds_each) if self.seconds_each else 0.0


def beyond_cap(tally: Tally) -> int:
    """The trials past the rule's 40 a cell exercised at its share so far would need to make 20 exercised (0 when
    it makes them within 40; a cell never exercised is counted apart)."""
    if not tally.exercised:
        return 0
    needed = tally.finished + math.ceil((trials_for_bound() - tally.exercised) * tally.finished / tally.exercised)
    return max(0, needed - AT_MOST)


def estimate(run: RunFolder, previous: list[RunFolder],
             event_seconds: float | None = None) -> tuple[dict[tuple[str, str], Column], dict[str, float]]:
    trials = latest_per_trial(run.trials())
    meta = run.meta()
    earlier = [latest_per_trial(p.trials()) for p in previous]
    by_cell = defaultdict(list)
    for record in trials:
        by_cell[(record["scenario"], record["backend"], record["variant"])].append(record)
    columns: dict[tuple[str, str], Column] = {}
    for target in cells_to_settle(RunView.of(trials, meta), earlier):
        scenario = scenarios.load(target.scenario)
        column = columns.setdefault((target.scenario, target.variant), Column(
            target.scenario, target.variant, scenario.fault_reach is FaultReach.ONE_EVENT))
        column.cells += 1
        column.flipped += Why.FLIPPED in target.why
        records = by_cell[target.cell]
        tally = Tally.of(records, target.harm)
        wanted = target.rule.wanted(tally)
        if not wanted:
            continue
        column.open += 1
        column.trials += wanted
        column.rounds = max(column.rounds, wanted)
        durations = [r["duration"] for r in records if r.get("status") == "ok" and r.get("duration")]
        median = statistics.median(durations) if durations else 0.0
        if column.event and event_seconds is not None:
            median = event_seconds
        column.seconds_each.append(median)
        column.trial_seconds += wanted * median
        if Why.FLIPPED not in target.why and not tally.failures:
            column.never += not tally.exercised
            past = beyond_cap(tally)
            column.rare += past > 0
            column.rare_trials += past
            column.rare_seconds += past * median
    bounds = (meta.get("bounds") or {}).get("scenarios", {})
    per_scenario: dict[str, float] = defaultdict(float)
    for column in columns.values():
        at_once = max(1, int(bounds.get(column.scenario, {}).get("at_once", 1)))
        per_scenario[column.scenario] += (column.rounds * column.median if column.event else column.trial_seconds) \
            / at_once
    for name in list(per_scenario):  # an event column cannot go faster than its own rounds one after another
        longest = max((c.rounds * c.median for c in columns.values() if c.scenario == name and c.event), default=0.0)
        per_scenario[name] = max(per_scenario[name], longest)
    return columns, dict(per_scenario)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", default=REFERENCE)
    parser.add_argument("--previous", action="append", default=None)
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--budget-minutes", type=float, default=31.0)
    parser.add_argument("--event-seconds", type=float, default=None)
    args = parser.parse_args()
    declared.install(scenarios.fault_columns())
    declared.install_roles(backends.post_roles())
    declared.install_measured(scenarios.measured())
    run = RunFolder.open(args.results, args.run)
    previous = [RunFolder.open(args.results, p) for p in (EARLIER if args.previous is None else args.previous)]
    columns, per_scenario = estimate(run, previous, args.event_seconds)
    print(f"# Settling {run.run_id} against {', '.join(p.run_id for p in previous)}\n")
    print("| column | cells | flipped | open | to add | median trial | est. min | never exercised | too rare "
          "(trials past 40, min) |")
    print("|---|---|---|---|---|---|---|---|---|")
    bounds = (run.meta().get("bounds") or {}).get("scenarios", {})
    for (scenario, variant), c in sorted(columns.items(), key=lambda kv: -(kv[1].rounds * kv[1].median if kv[1].event
                                                                            else kv[1].trial_seconds)):
        at_once = max(1, int(bounds.get(scenario, {}).get("at_once", 1)))
        minutes = (c.rounds * c.median if c.event else c.trial_seconds / at_once) / 60
        added = f"{c.rounds} events ({c.trials} subjects)" if c.event else f"{c.trials} trials"
        rare = f"{c.rare} ({c.rare_trials}, {c.rare_seconds / (1 if c.event else at_once) / 60:.1f})" if c.rare else "0"
        print(f"| {scenario}/{variant} | {c.cells} | {c.flipped} | {c.open} | {added} | {c.median:.1f} s | "
              f"{minutes:.1f} | {c.never} | {rare} |")
    chosen = [scenarios.load(name) for name in per_scenario]
    phases = schedule(chosen, per_scenario, SHARED_LANES, SHARED_LANES + OWN_SERVER_LANES)
    total = composed(phases, per_scenario)
    print(f"\nPer scenario (minutes, its columns shared among its trials at once): "
          + ", ".join(f"{n} {s / 60:.1f}" for n, s in sorted(per_scenario.items(), key=lambda kv: -kv[1])))
    print(f"\nThe settle phase, composed into the run's lanes: {total / 60:.1f} min; budget {args.budget_minutes:g} "
          f"min; beyond it: {max(0.0, total / 60 - args.budget_minutes):.1f} min")
    budget = args.budget_minutes * 60
    for name, seconds in sorted(per_scenario.items(), key=lambda kv: -kv[1]):
        if seconds <= budget:
            continue
        at_once = max(1, int(bounds.get(name, {}).get("at_once", 1)))
        share = budget / seconds  # the part of its columns' rounds the budget covers
        reached = [f"{c.variant} ≤{100 * clean_bound(min(trials_for_bound(), 3 + int(c.rounds * share))):.0f} %"
                   for c in columns.values() if c.scenario == name and c.event and c.rounds]
        print(f"- {name} needs {seconds / 60:.1f} min ({at_once} at once); in {args.budget_minutes:g} min its clean "
              f"cells reach about: {', '.join(reached)}")

if __name__ == "__main__":
    main()
