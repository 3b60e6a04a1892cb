"""Trials added where the answer depends on them (issue 56): after a run's planned trials, rounds of trials for the
cells that decide a need or whose mark flipped against a previous reference, until each meets its rule or the time
budget is spent.

The cells come from lab/runner/settle_cells.py (the decision's one entry point), their rules from
lab/runner/settle_rule.py, each round's trials and the gate that drops what is no longer needed from
lab/runner/settle_rounds.py; this module runs the rounds: each scenario with cells to settle in a lane of its own,
as the planned trials run (lab/runner/lanes.py), alone-lane scenarios first (they are short, and their cells would
otherwise wait for the rest of the budget), each round re-selecting its cells from the records so far (a failure
found makes its column decide for every candidate of the need).

Added trials are ordinary trials: the same executors, the same record in the same trials.jsonl, each finished one
appended at once, ids continuing each cell's index. meta.json's `settle` says what was asked (the budget, the
previous references), the rules, every round, and every cell with where it ended, rewritten after each round; its
`spent_s` counts the seconds settling took so far, so `lab run --resume RUN` settles on with what is left of the
budget (and `--settle-minutes N` on a resume gives N more minutes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from lab.checkers.outcomes import latest_per_trial
from lab.declarations.pacing import Lane
from lab.report.sections import RunView
from lab.records.results import RunFolder
from lab.runner import waves as capacity_plan
from lab.runner.context import RunContext
from lab.runner.events import run_events
from lab.runner.lanes import Phase, run_lanes, schedule
from lab.runner.meta import change_meta
from lab.runner.plan import Plan, RunRequest, SettleAsk
from lab.runner.settle_cells import cells_to_settle, ruled_out
from lab.runner.settle_progress import SettleProgress
from lab.runner.settle_rounds import Ledger, SettleGate, Templates, event_round, trial_round
from lab.runner.settle_rule import Ended, SettleTarget, StopRule, Why
from lab.runner.trials import run_trials
from lab.servers.clients import redact_text
from scenarios.base import FaultReach, Scenario

DEFAULT_MINUTES = 30.0  # with the reference's 29 planned minutes, within the hour DESIGN.md allows the reference
NO_PREVIOUS = "none"  # --previous none: compare with no earlier reference (no cell counts as flipped)

ROUND_RULE = ("after the planned trials, each scenario with cells to settle runs rounds, and each round re-selects its "
              "cells from the records so far; a round gives each open cell the trials its rule still wants at its "
              "exercised share so far, interleaved cell by cell; in a shared-event scenario it gives each column "
              "that many events, one after another, each event's subjects the column's cells still open when it "
              "starts, the columns side by side; a queued trial (or subject) is dropped the moment its cell meets "
              "its rule (a deciding cell's first failure) or when its cell's median trial would not end before the "
              "budget's deadline")


@dataclass(frozen=True)
class Settling:
    """The settling a run does, as meta.json keeps it: its whole budget, the seconds spent so far, and the previous
    references' folders."""

    budget_s: float
    spent_s: float = 0.0
    previous: tuple[str, ...] = ()

    @property
    def left_s(self) -> float:
        return max(0.0, self.budget_s - self.spent_s)

    @classmethod
    def asked(cls, ask: SettleAsk, recorded: dict | None) -> Settling:
        """A run's settling from what this command asked and what its meta.json recorded (a resumed run): the
        recorded budget and seconds spent, `minutes` more when asked again; the previous references asked, else
        the recorded ones, else the committed reference."""
        spent = float((recorded or {}).get("spent_s", 0.0))
        if ask.minutes is not None:
            budget = spent + ask.minutes * 60 if recorded else ask.minutes * 60
        else:
            budget = float(recorded["budget_s"]) if recorded else DEFAULT_MINUTES * 60
        if ask.previous is not None:
            previous = tuple(p for p in ask.previous if p != NO_PREVIOUS)
        elif recorded:
            previous = tuple(p["path"] for p in recorded.get("previous", []))
        else:
            previous = committed_reference()
        return cls(budget, spent, previous)


    def resolved(self, results_root: Path) -> Settling:
        """The same settling with each previous reference opened (a run id under the results root, or a folder)
        and named by its folder: LabError, before any server starts, for one that is not there."""
        return replace(self, previous=tuple(str(previous_folder(p, results_root).path) for p in self.previous))


def committed_reference() -> tuple[str, ...]:
    """The folders of the runs the checkout's REPORT.md names (none where it has no reference)."""
    from lab.errors import LabError
    from lab.report.advice import reference_folders

    try:
        return tuple(str(folder.path) for folder in reference_folders())
    except LabError:
        return ()


def previous_folder(given: str, results_root: Path) -> RunFolder:
    """A previous reference by folder or by run id under the results root."""
    return RunFolder.open(results_root, given)


def record_asked(folder: RunFolder, settling: Settling, request: RunRequest) -> None:
    """meta.json's `settle`: the budget, the previous references and each command that settled (a resumed run's
    too); the rules; rounds and cells to come."""
    previous = [{"run": found.run_id, "path": str(found.path)}
                for found in (previous_folder(p, request.results_root) for p in settling.previous)]
    command = "lab " + " ".join(redact_text(arg) for arg in request.argv)

    def change(meta: dict) -> None:
        state = meta.setdefault("settle", {"spent_s": 0.0, "scenarios": {}})
        state.update({"budget_s": round(settling.budget_s, 1), "previous": previous, "round_rule": ROUND_RULE,
                      "rules": {" and ".join(why.names()): StopRule.for_(why).describe()
                                for why in (Why.DECIDING, Why.FLIPPED, Why.DECIDING | Why.FLIPPED)}})
        state.setdefault("commands", []).append(command)
    change_meta(folder, change)


@dataclass
class ScenarioSettling:
    """One scenario's settling: its records (a Ledger of its own), its previous records, its rounds (a resumed
    run's earlier ones first)."""

    scenario: Scenario
    ledger: Ledger
    templates: Templates
    meta: dict
    previous: list[list[dict]]
    rounds: list[dict] = field(default_factory=list)
    ruled_out: dict[str, set[str]] = field(default_factory=dict)  # need -> locks already out of it, run-wide
    seen: dict[tuple, SettleTarget] = field(default_factory=dict)  # every cell it selected, with its reasons

    def select(self) -> list[SettleTarget]:
        """cells_to_settle over this scenario's records alone (a column decides from its own cells): the runnable
        ones, remembered for meta.json."""
        targets = [t for t in cells_to_settle(RunView.of(self.ledger.all(), self.meta), self.previous, self.ruled_out)
                   if t.scenario == self.scenario.name and self.templates.runnable(t)]
        for target in targets:
            self.seen[target.cell] = target
        return targets

    @property
    def one_event(self) -> bool:
        return self.scenario.fault_reach is FaultReach.ONE_EVENT

    def cells_json(self, ended_by: Ended | None) -> list[dict]:
        """Every cell it selected, with where it stands and how it ended (ended_by: for one still open); its rule is
        the one meta.json's `rules` gives for its reasons."""
        out = []
        for target in self.seen.values():
            tally = self.ledger.tally(target)
            bound = tally.bound()
            ended = self.ledger.ended(target) or ended_by
            out.append({"backend": target.backend, "variant": target.variant, "why": target.why.names(),
                        "harm": target.harm.name.lower(),
                        "added_from": self.templates.first_added(target.cell),
                        "finished": tally.finished, "exercised": tally.exercised, "failures": tally.failures,
                        "errors": tally.errors, "bound": None if bound is None else round(bound, 4),
                        "ended": None if ended is None else ended.value})
        return out


def settle_phase(ctx: RunContext, planned: Plan, settling: Settling, waves: dict[str, capacity_plan.Wave],
                 results_root: Path, lanes: tuple[int, int] = (1, 0)) -> None:
    """Settle the cells of every scenario of the plan (every trial the run planned, whether done or not, skips
    marked) within what is left of the budget; meta.json keeps each round. lanes: the run's-server scenarios' lanes
    and ceiling, as the planned trials had them (lab/runner/run.py shared_lanes, shared_ceiling)."""
    started = time.monotonic()
    deadline = started + settling.left_s
    templates = Templates.of(spec for specs in planned.pending.values() for spec in specs)
    recorded = ctx.folder.trials()
    meta = ctx.folder.meta()
    previous = [latest_per_trial(folder.trials()) for folder in _comparable(ctx, settling, results_root)]
    earlier = (meta.get("settle") or {}).get("scenarios", {})  # a resumed run's rounds so far
    # Who is out of each need already, over the whole run's planned trials: read once, it spares every scenario's
    # rounds the cells of a lock that cannot qualify, wherever the fault that ruled it out was.
    out = ruled_out(RunView.of(latest_per_trial(recorded), meta))
    # A ledger per scenario: each is read and written by its own lane's thread alone.
    jobs = {s.name: ScenarioSettling(s, Ledger(r for r in recorded if r["scenario"] == s.name), templates, meta,
                                     [[r for r in records if r.get("scenario") == s.name] for records in previous],
                                     list(earlier.get(s.name, {}).get("rounds", [])), ruled_out=out)
            for s in planned.scenarios}
    estimates = {name: _estimate(job, ctx.profile) for name, job in jobs.items()}
    chosen = [job.scenario for name, job in jobs.items() if estimates[name] > 0]
    try:
        for phase in _phases(chosen, estimates, lanes):
            run_lanes(phase, lambda scenario: _settle_scenario(ctx, jobs[scenario.name], deadline, waves),
                      ctx.stop)
    finally:
        spent = time.monotonic() - started
        # A cell still open when the rounds ended unstopped is one the budget left no time for.
        _record_end(ctx.folder, jobs, spent, None if ctx.stop.is_set() else Ended.BUDGET)
    ctx.progress.console.print(f"added trials: {_summary(jobs)} in {spent:.0f} s of {settling.left_s:.0f} s left of "
                               f"the budget", highlight=False, soft_wrap=True)


def _comparable(ctx: RunContext, settling: Settling, results_root: Path) -> list[RunFolder]:
    """The previous references of this run's profile: a mark under other timers and trial counts is no flip."""
    found = []
    for given in settling.previous:
        folder = previous_folder(given, results_root)
        profile = folder.meta().get("profile")
        if profile == ctx.profile:
            found.append(folder)
        else:
            ctx.progress.console.print(f"added trials: {folder.run_id} ran the {profile} profile, this run "
                                       f"{ctx.profile}: its marks are not compared", highlight=False, soft_wrap=True)
    return found


def _estimate(job: ScenarioSettling, profile: str) -> float:
    """Seconds the scenario's first round would take at its cells' usual durations, for the lanes' order; 0 when it
    has no open cell (it is not settled at all)."""
    targets = [t for t in job.select() if job.ledger.ended(t) is None]
    if not targets:
        return 0.0
    seconds = sum((job.ledger.seconds(t.cell) or 1.0) * (1 if job.one_event else t.rule.wanted(job.ledger.tally(t)))
                  for t in targets)
    return max(1e-3, seconds / max(1, job.scenario.parallelism(profile)))


def _phases(chosen: list[Scenario], estimates: dict[str, float], lanes: tuple[int, int]) -> list[Phase]:
    """The planned run's lanes for the scenarios with cells to settle, alone-lane ones first."""
    phases = schedule(chosen, estimates, *lanes)
    alone = [p for p in phases if all(s.pacing.lane is Lane.ALONE for pool in p for s in pool.scenarios)]
    return alone + [p for p in phases if p not in alone]


def _settle_scenario(ctx: RunContext, job: ScenarioSettling, deadline: float,
                     waves: dict[str, capacity_plan.Wave]) -> None:
    """Rounds of one scenario until no cell of it is open, none fits before the deadline, or the run stops."""
    scenario, ledger = job.scenario, job.ledger
    shown = SettleProgress(ctx.progress.console, ctx.progress, scenario.name, ledger, events=job.one_event)
    fallback = scenario.trial_seconds(ctx.profile)
    try:
        while not ctx.stop.is_set():
            open_cells = [t for t in job.select() if ledger.ended(t) is None]
            gate = SettleGate(open_cells, ledger, deadline, fallback, sequential=job.one_event)
            open_cells = [t for t in open_cells if gate.fits(t.cell)]
            specs = (event_round if job.one_event else trial_round)(open_cells, ledger, job.templates)
            if not specs:
                break
            events = len({(s.variant, s.index) for s in specs}) if job.one_event else None
            shown.begin_round(open_cells, len(specs), events)
            began = time.monotonic()
            round_ctx = replace(ctx, plan=Plan([scenario], {scenario.name: specs}), waves=waves)
            with scenario.trials_scope(ctx.services, ctx.profile, events or len(specs)):
                if job.one_event:
                    finished = run_events(round_ctx, scenario, shown, gate)
                else:
                    finished = run_trials(round_ctx, scenario, shown, gate=gate)
            job.rounds.append({"round": len(job.rounds) + 1, "cells": len(open_cells), "planned": len(specs),
                               "ran": len(finished.kept), "seconds": round(time.monotonic() - began, 1),
                               **({} if events is None else {"events_planned": events, "events_ran": len(
                                   {r["event"]["id"] for r in finished.kept if r.get("event")})})})
            _record_scenario(ctx.folder, job, None)
            if not finished.kept:  # nothing came of the round (every trial dropped): another would be the same
                break
    finally:
        shown.finish()


def _record_scenario(folder: RunFolder, job: ScenarioSettling, ended_by: Ended | None) -> None:
    def change(meta: dict) -> None:
        meta.setdefault("settle", {}).setdefault("scenarios", {})[job.scenario.name] = {
            "rounds": job.rounds, "cells": job.cells_json(ended_by)}
    change_meta(folder, change)


def _record_end(folder: RunFolder, jobs: dict[str, ScenarioSettling], spent: float, outcome: Ended | None) -> None:
    """Each scenario's cells as they ended (one still open when the budget ran out: budget spent; when the run was
    stopped: open), and the seconds spent settling, added to a resumed run's earlier ones."""
    def change(meta: dict) -> None:
        state = meta.setdefault("settle", {})
        state["spent_s"] = round(float(state.get("spent_s", 0.0)) + spent, 1)
        for name, job in jobs.items():
            if job.seen:
                state.setdefault("scenarios", {})[name] = {"rounds": job.rounds, "cells": job.cells_json(outcome)}
    change_meta(folder, change)


def _summary(jobs: dict[str, ScenarioSettling]) -> str:
    """'412 trials to 57 cells, 40 of them still open' from the jobs' rounds and cells."""
    ran = sum(r["ran"] for job in jobs.values() for r in job.rounds)
    cells = [t for job in jobs.values() for t in job.seen.values()]
    still = sum(1 for job in jobs.values() for t in job.seen.values() if job.ledger.ended(t) is None)
    return f"{ran} trials for {len(cells)} cells, {still} of them still open"


__all__ = ["DEFAULT_MINUTES", "NO_PREVIOUS", "SettleAsk", "Settling", "record_asked", "settle_phase"]
