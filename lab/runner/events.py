"""The event executor: a FaultReach.ONE_EVENT scenario's events on a thread pool, each event's subjects recorded
together the moment it ends, one record per subject under its own trial id.

Beside trials.py, which runs trials one by one, because an event keeps two promises of its own: a subject is
judged on its own measures alone, so one subject's error or verdict cannot reach another's record; and an
event's records are written in one go, so an event interrupted before its end leaves none of them and a resumed
run plans it again whole (scenarios/events.py plan_events). The scenario's bound counts an event once.

An event whose fault did not confirm (FaultNotConfirmed: the failover never came, the cut never showed) is no trial
of any lock: its subjects' records say so, as errors, and it runs once more (UNCONFIRMED_RETRIES) on fresh servers;
the retry's records come after, and a trial's latest record is its result (lab/checkers/outcomes.py
latest_per_trial), as for a resumed run's re-run trial. An event that broke any other way is not run again.
"""

from __future__ import annotations

import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

import backends
from lab.errors import Interrupted
from lab.faults.base import FaultNotConfirmed
from lab.runner import waves as capacity_plan
from lab.runner import pacing, records
from lab.runner.context import RunContext
from lab.runner.progress import ScenarioProgress
from lab.runner.records import Started, TrialRecord
from lab.runner.trials import Finished, TrialFloor, TrialGate, finished_now, let_stop, record_skipped
from lab.workload.contract import describe_error
from scenarios.base import Scenario, Skip
from scenarios.events import EventEnv, EventOutcome, EventSpec, SubjectOutcome, event_record_fields, plan_events


# How many more times an event whose fault did not confirm runs. Measured: 1 Sentinel event of 15 in a full run
# (the primary cut, no +switch-master within 30 s on two saturated cores), where its other 14 and the run before
# confirmed every one.
UNCONFIRMED_RETRIES = 1


@dataclass(frozen=True)
class EventResult:
    """What an event leaves: every subject's record in the event's order (None: the run stopped before or while it
    ran), and whether its fault did not confirm, the one break that runs it again."""

    records: list[TrialRecord] | None
    unconfirmed: bool = False


def event_alone(scenario: Scenario, event: EventSpec, services) -> bool:
    """An event runs with nothing beside it when any of its subjects would (lab/runner/pacing.py exclusive)."""
    return any(pacing.exclusive(scenario, spec, services) for spec in event.subjects)


def event_cost(ctx: RunContext, scenario: Scenario, event: EventSpec) -> int:
    """The run's PostgreSQL sessions an event holds at most: its subjects' together."""
    return sum(ctx.plan.cost(scenario, spec, ctx.profile) for spec in event.subjects)


def run_events(ctx: RunContext, scenario: Scenario, shown: ScenarioProgress, gate: TrialGate | None = None) -> Finished:
    """Record the scenario's skipped trials, then run its events, as many at once as its parallelism and its session
    budget allow. An error or Ctrl-C sets the stop and is raised; an event in flight is not recorded. Returns one
    floor per finished event (its part in the scenario's bound) and every record kept; the profile's events all run,
    and a gate (the added trials' rounds, lab/runner/settle.py) holds an event back while a subject of it is in
    flight in another, starts it with only the subjects it still needs, and drops it when it needs none."""
    events = plan_events(record_skipped(ctx, ctx.plan.pending[scenario.name], shown))
    params = scenario.profile_params(ctx.profile)
    wave = ctx.wave(scenario)
    budget = capacity_plan.SessionBudget(wave.budget if wave else 1)
    workers = max(1, scenario.parallelism(ctx.profile))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=scenario.name)
    queue = capacity_plan.Dispatch([(event, event_cost(ctx, scenario, event)) for event in events], budget,
                                   scarce_first=wave is not None and wave.limited)
    alone = {event.id: event_alone(scenario, event, ctx.services) for event in events}
    declared = pacing.trial_floor(scenario, ctx.profile)
    finished_events = Finished()
    in_flight: dict[Future, tuple[EventEnv, int]] = {}
    tries: dict[str, int] = {}

    def drop_unneeded() -> None:
        if gate is not None:
            dropped = queue.drop(lambda event: not any(gate.needed(spec) for spec in event.subjects))
            shown.drop(sum(len(event.subjects) for event in dropped))

    try:
        while (queue and not ctx.stop.is_set()) or in_flight:
            if gate is not None and gate.due():
                drop_unneeded()
            by_itself = any(alone[env.event.id] for env, _ in in_flight.values())
            slots = 0 if ctx.stop.is_set() or by_itself else workers - len(in_flight)
            for event, sessions in queue.ready(slots, alone=lambda event: alone[event.id], busy=bool(in_flight),
                                               later=lambda event: gate is not None and any(
                                                   gate.later(spec) for spec in event.subjects)):
                if gate is not None:
                    event = needed_subjects(event, gate, shown)
                    if not event.subjects:
                        budget.give(sessions)
                        continue
                env = EventEnv.of(event, [ctx.trial_env(spec, params) for spec in event.subjects])
                in_flight[pool.submit(run_event, scenario, env)] = (env, sessions)
            for env, sessions, result in finished_now(in_flight, budget):
                kept = result.records
                if result.unconfirmed and tries.get(env.event.id, 0) < UNCONFIRMED_RETRIES and not ctx.stop.is_set():
                    tries[env.event.id] = tries.get(env.event.id, 0) + 1
                    ctx.folder.append_all(kept or [])  # the attempt stays on record; the retry's records follow
                    if gate is not None:
                        for record in kept or []:
                            gate.kept(record)
                    queue.again(env.event, sessions)
                    continue
                if kept is not None and not ctx.stop.is_set():
                    ctx.folder.append_all(kept)
                    finished_events.kept.extend(kept)
                    if gate is not None:
                        for record in kept:
                            gate.kept(record)
                    floor = event_floor(env, kept, declared)
                    if floor is not None:
                        finished_events.floors.append(TrialFloor(floor, sessions, alone[env.event.id]))
                shown.advance_event(kept)
            shown.tick()
        return finished_events
    except BaseException:
        ctx.stop.set()  # wake every waiting event; what is in flight is not recorded
        raise
    finally:
        if ctx.stop.is_set():
            let_stop(in_flight)
        pool.shutdown(wait=not ctx.stop.is_set(), cancel_futures=True)


def needed_subjects(event: EventSpec, gate: TrialGate, shown: ScenarioProgress) -> EventSpec:
    """The event with only the subjects the gate still needs (each then counted as started), the others out of the
    progress total."""
    needed = tuple(spec for spec in event.subjects if gate.needed(spec))
    shown.drop(len(event.subjects) - len(needed))
    for spec in needed:
        gate.started(spec)
    return replace(event, subjects=needed)


def event_floor(env: EventEnv, kept: list[TrialRecord], declared: float) -> float | None:
    """Seconds a finished event could not have taken less: the declared timers or the longer waits it sat through
    (its subjects' waits are one meter's), never more than it took; None when no subject finished."""
    durations = [record["duration"] for record in kept if record.get("status") == "ok" and "duration" in record]
    if not durations:
        return None
    return min(max(declared, env.waited), max(durations))


def run_event(scenario: Scenario, env: EventEnv) -> EventResult:
    """Every subject's record, in the event's order (none when the run stopped before or while it ran)."""
    if env.first.stop.is_set():
        return EventResult(None)
    started = Started()
    event = env.event
    try:
        outcome = scenario.run_event(env)
    except Skip as exc:  # none of its subjects runs here
        return EventResult([records.skipped(spec, exc.args[0] if exc.args else "", event_record_fields(event, None))
                            for spec in event.subjects])
    except Interrupted:
        return EventResult(None)
    except Exception as exc:  # the event itself broke (its fault did not confirm): every subject is an error
        if env.first.stop.is_set():
            return EventResult(None)
        reason, trace, timing = describe_error(exc), traceback.format_exc(limit=6), started.timing()
        return EventResult([records.error(spec, reason, trace, timing, event_record_fields(event, None))
                            for spec in event.subjects], unconfirmed=isinstance(exc, FaultNotConfirmed))
    if env.first.stop.is_set():
        return EventResult(None)
    timing = started.timing()  # the event's own time, without the checkers'
    return EventResult([subject_record(scenario, subject, outcome, event, timing) for subject in outcome.subjects])


def subject_record(scenario: Scenario, subject: SubjectOutcome, outcome: EventOutcome, event: EventSpec,
                   timing: dict) -> TrialRecord:
    """One subject's record from its own measures alone, judged by the scenario's checkers as a trial's are; its
    own exception (or a judge's) makes it an error, and no other subject's."""
    shared = event_record_fields(event, outcome)
    if isinstance(subject.failed, Skip):
        return records.skipped(subject.spec, subject.failed.args[0] if subject.failed.args else "", shared)
    if subject.failed is not None:
        trace = "".join(traceback.format_exception(subject.failed, limit=6))
        return records.error(subject.spec, describe_error(subject.failed), trace, timing, shared)
    measures = dict(subject.measures or {})  # outcome_fields moves its history into the record: the subject's stays
    try:
        return records.ok(subject.spec, measures,
                          records.outcome_fields(scenario, measures, backends.load(subject.spec.backend)), timing,
                          shared)
    except Exception as exc:  # its checkers broke over its history: its own error
        return records.error(subject.spec, describe_error(exc), traceback.format_exc(limit=6), timing, shared)


