"""The trial executor: one scenario's trials on a thread pool, under the server's session budget, each
finished one appended to trials.jsonl at once.

Its own module because its promises are easy to break: a trial starts only when its PostgreSQL sessions
are free, the main thread stays responsive to Ctrl-C, and once the run stops nothing more is recorded.
"""

from __future__ import annotations

import time
from collections import Counter
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import backends
from lab.errors import Interrupted
from lab.runner import waves as capacity_plan
from lab.runner import pacing, records
from lab.runner.context import RunContext
from lab.runner.progress import ScenarioProgress
from lab.runner.records import Started, TrialRecord
from lab.workload.contract import describe_error
from scenarios.base import Scenario, Skip, TrialEnv, TrialSpec

WAIT_POLL_S = 0.2  # a short wait keeps the main thread responsive to Ctrl-C
TRIAL_WIND_DOWN_S = 30.0  # after a stop, how long the trials in flight get to see it and clean up
E = TypeVar("E")  # what runs: a trial's env, or an event's
R = TypeVar("R")  # what it returns


@dataclass(frozen=True)
class TrialFloor:
    """A finished trial's part in the scenario's lower bound: the seconds it could not take less, the PostgreSQL
    sessions it held, and whether it ran alone (pacing.exclusive)."""

    seconds: float
    sessions: int
    alone: bool = False


@dataclass
class Finished:
    """What a scenario's trials leave for after them: each finished trial's floor (the lower bound), the finished
    records (its precision), a resumed run's earlier ones included, and every record the call kept."""

    floors: list[TrialFloor] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    kept: list[TrialRecord] = field(default_factory=list)  # every record this call appended, in order


class TrialGate(Protocol):
    """Which of a scenario's queued trials still run, and which wait: read by run_trials as trials finish."""

    drops: bool  # whether needed() can ever say no (only then is it asked, and the records handed to kept())

    def needed(self, spec: TrialSpec) -> bool:
        """Whether a queued trial must still start."""

    def later(self, spec: TrialSpec) -> bool:
        """Whether a queued trial must wait for others before it starts."""

    def started(self, spec: TrialSpec) -> None:
        """A queued trial starts."""

    def kept(self, record: TrialRecord) -> None:
        """A trial's record, the moment it is appended to trials.jsonl."""

    def due(self) -> bool:
        """Whether needed() may say no to more trials now although none finished (a deadline passed)."""


class DeclaredPacing:
    """The scenario's own pacing (lab/runner/pacing.py): its profile's trials, the sequential rule's extra ones while
    their cell is unsettled, or its trials until precise enough. Only a scenario that can stop early reads its records
    (a resumed run's earlier ones first); others keep none."""

    def __init__(self, ctx: RunContext, scenario: Scenario):
        self.scenario, self.profile = scenario, ctx.profile
        self.drops = pacing.reads_finished(scenario)
        earlier = [r for r in ctx.folder.trials() if r.get("scenario") == scenario.name] if self.drops else []
        # Finished trials per cell, whatever their status: a sequential-rule trial waits for its cell's first ones.
        self.finished_in_cell = Counter((r.get("backend"), r.get("variant")) for r in earlier)
        self.records = [r for r in earlier if r.get("status") == "ok"]  # what needed() and the precision read

    def needed(self, spec: TrialSpec) -> bool:
        return pacing.needed(self.scenario, self.profile, spec, self.records)

    def later(self, spec: TrialSpec) -> bool:
        return self.drops and pacing.later(self.scenario, self.profile, spec,
                                           self.finished_in_cell[(spec.label, spec.variant)])

    def started(self, spec: TrialSpec) -> None:
        pass

    def kept(self, record: TrialRecord) -> None:
        self.finished_in_cell[(record["backend"], record["variant"])] += 1
        if record.get("status") == "ok":
            self.records.append(dict(record))

    def due(self) -> bool:
        return False


def run_trials(ctx: RunContext, scenario: Scenario, shown: ScenarioProgress,
               alone: dict[str, bool] | None = None, gate: TrialGate | None = None) -> Finished:
    """Record the scenario's skipped trials, then run the others, as many at once as its parallelism and
    its session budget allow. An error or Ctrl-C sets the stop (waking every waiting trial) and is raised;
    what was in flight is not recorded.

    A trial not yet started that the gate no longer needs (by default the scenario's own pacing, DeclaredPacing:
    its figures are precise enough, or its cell is settled) is dropped, unrecorded. Returns each finished trial's
    floor and session cost (finished_floor), the records the scenario's pacing read, and every record kept."""
    runnable = record_skipped(ctx, ctx.plan.pending[scenario.name], shown)
    params = scenario.profile_params(ctx.profile)
    wave = ctx.wave(scenario)
    budget = capacity_plan.SessionBudget(wave.budget if wave else 1)
    workers = max(1, scenario.parallelism(ctx.profile))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=scenario.name)
    queue = capacity_plan.Dispatch([(spec, ctx.plan.cost(scenario, spec, ctx.profile)) for spec in runnable],
                                   budget, scarce_first=wave is not None and wave.limited)
    declared = pacing.trial_floor(scenario, ctx.profile)
    if alone is None:  # which trials run with nothing beside them (pacing.exclusive), by trial id
        alone = {spec.id: pacing.exclusive(scenario, spec, ctx.services) for spec in runnable}
    own = DeclaredPacing(ctx, scenario) if gate is None else None
    gate = gate or own
    assert gate is not None

    def drop_unneeded() -> None:
        shown.drop(len(queue.drop(lambda spec: not gate.needed(spec))))

    finished_trials = Finished(records=own.records if own is not None else [])
    if gate.drops:  # a resumed run's earlier trials may have been enough
        drop_unneeded()
    in_flight: dict[Future, tuple[TrialEnv, int]] = {}
    try:
        while (queue and not ctx.stop.is_set()) or in_flight:
            # Start what fits: a trial whose sessions are not free yet waits without holding a worker,
            # and a later one that fits (a Redis lock's, which needs none) goes first.
            by_itself = any(alone[env.spec.id] for env, _ in in_flight.values())
            slots = 0 if ctx.stop.is_set() or by_itself else workers - len(in_flight)
            for spec, sessions in queue.ready(slots, alone=lambda spec: alone[spec.id], busy=bool(in_flight),
                                              later=gate.later):
                gate.started(spec)
                env = ctx.trial_env(spec, params)
                in_flight[pool.submit(run_trial, scenario, env)] = (env, sessions)
            finished = False
            for env, sessions, record in finished_now(in_flight, budget):
                finished = True
                if record is not None and not ctx.stop.is_set():
                    ctx.folder.append(record)
                    finished_trials.kept.append(record)
                    if gate.drops:
                        gate.kept(record)
                    floor = finished_floor(scenario, env, record, declared)
                    if floor is not None:
                        finished_trials.floors.append(TrialFloor(floor, sessions, alone[env.spec.id]))
                shown.advance(record)
            if gate.drops and (finished or gate.due()):
                drop_unneeded()
            shown.tick()
        return finished_trials
    except BaseException:
        # Wake every waiting trial now; what is in flight is not recorded.
        ctx.stop.set()
        raise
    finally:
        if ctx.stop.is_set():
            let_stop(in_flight)
        pool.shutdown(wait=not ctx.stop.is_set(), cancel_futures=True)


def finished_now(in_flight: dict[Future[R], tuple[E, int]],
                 budget: capacity_plan.SessionBudget) -> Iterator[tuple[E, int, R]]:
    """Wait up to WAIT_POLL_S for the trials (or events) in flight; each that finished leaves in_flight, its sessions
    go back to the budget, and it comes out as (its env, its sessions, its result), one by one (its error raised
    there, after the ones before it were taken)."""
    finished, _ = wait(set(in_flight), timeout=WAIT_POLL_S, return_when=FIRST_COMPLETED)
    for future in finished:
        env, sessions = in_flight.pop(future)
        budget.give(sessions)
        yield env, sessions, future.result()


def let_stop(in_flight: Mapping[Future, object]) -> None:
    """After a stop, wait for the trials (or events) in flight to see it and clean up (their holders killed, their files
    written) before the run stops the servers and removes its temp dir under them; at most TRIAL_WIND_DOWN_S,
    and a second Ctrl-C ends the wait (their children die with the lab)."""
    pending, give_up = set(in_flight), time.monotonic() + TRIAL_WIND_DOWN_S
    while pending and time.monotonic() < give_up:
        try:
            _, pending = wait(pending, timeout=WAIT_POLL_S)
        except KeyboardInterrupt:
            return


def finished_floor(scenario: Scenario, env: TrialEnv, record: TrialRecord, declared: float) -> float | None:
    """Seconds a finished trial could not have taken less: its declared timers or the longer waits it was seen
    to sit through, plus the time inside its own measurement; never more than it took. None for a trial that
    did not finish (skipped, broken): its time says nothing about what the scenario must wait."""
    if record.get("status") != "ok":
        return None
    floor = max(declared, env.waited) + scenario.measured_seconds(record.get("measures") or {})
    return min(floor, record.get("duration", floor))


def run_trial(scenario: Scenario, env: TrialEnv) -> TrialRecord | None:
    """One trial's record; None when the run stopped before or while it ran (it is not kept)."""
    if env.stop.is_set():
        return None
    started = Started()
    try:
        measures = scenario.run_trial(env)
        timing = started.timing()  # the trial's own time, without the checkers'
        return records.ok(env.spec, measures, records.outcome_fields(scenario, measures,
                                                                     backends.load(env.spec.backend)), timing)
    except Skip as exc:
        return records.skipped(env.spec, exc.args[0] if exc.args else "")
    except Interrupted:
        return None
    except Exception as exc:  # one broken trial must not end the run; it is recorded as such
        if env.stop.is_set():
            return None
        reason, timing = describe_error(exc), started.timing()
        return records.error(env.spec, reason, traceback.format_exc(limit=6), timing)


def record_skipped(ctx: RunContext, specs: list[TrialSpec], shown: ScenarioProgress) -> list[TrialSpec]:
    """Append a record for each trial planned as skipped; the others, in plan order, are left to run."""
    runnable = []
    for spec in specs:
        if spec.skip is not None:
            record = records.skipped(spec, spec.skip)
            ctx.folder.append(record)
            shown.advance(record)
        else:
            runnable.append(spec)
    return runnable
