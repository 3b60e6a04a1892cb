"""One fault event for many subjects: what the runner plans, hands a scenario and gets back.

A scenario whose fault is the same for every backend it reaches (a Patroni split brain, a PostgreSQL failover)
declares FaultReach.ONE_EVENT (scenarios/base.py). The runner then plans, per (variant, repetition), one event
whose subjects are the trials it would have run one by one; the scenario strikes the fault once for all of
them (scenarios/_shared_event.py), and hands back each subject's own measures, or its own error, so each is
judged on its own history and recorded under its own trial id, as if it had run alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from scenarios.trial import TrialEnv, TrialSpec, WaitMeter


class RunsEvents(Protocol):
    """A scenario that strikes its fault once per event (scenarios/base.py Scenario.run_event)."""

    def run_event(self, env: EventEnv) -> EventOutcome: ...


@dataclass(frozen=True)
class EventSpec:
    """One planned event: a scenario's variant at one repetition, and the trials (subjects) it serves.

    Its id names no backend: every subject keeps its own trial id (TrialSpec.id) in its record."""

    scenario: str
    variant: str
    index: int
    subjects: tuple[TrialSpec, ...]

    @property
    def id(self) -> str:
        return f"{self.scenario}/{self.variant}/{self.index}"


def plan_events(specs: list[TrialSpec]) -> list[EventSpec]:
    """The runnable trials (skipped ones are left out) grouped into one event per (scenario, variant, index), in the
    order their first subject was planned; each subject once, in plan order. A resumed run plans only the trials
    still to run, so an event interrupted before its records were kept comes back whole."""
    grouped: dict[tuple[str, str, int], list[TrialSpec]] = {}
    for spec in specs:
        if spec.skip is None:
            grouped.setdefault((spec.scenario, spec.variant, spec.index), []).append(spec)
    return [EventSpec(scenario, variant, index, tuple(subjects))
            for (scenario, variant, index), subjects in grouped.items()]


@dataclass
class EventEnv:
    """What a running event may use: one TrialEnv per subject (its own spec, keys and tables), all on the run's
    servers and sharing one wait meter, so the event's timers count once in the scenario's bound."""

    event: EventSpec
    subjects: list[TrialEnv]

    @classmethod
    def of(cls, event: EventSpec, envs: list[TrialEnv]) -> EventEnv:
        meter = WaitMeter()
        return cls(event, [replace(env, meter=meter) for env in envs])

    @classmethod
    def alone(cls, env: TrialEnv) -> EventEnv:
        """An event of one subject: a trial run by itself (a test, the user's own cluster)."""
        spec = env.spec
        return cls(EventSpec(spec.scenario, spec.variant, spec.index, (spec,)), [env])

    @property
    def first(self) -> TrialEnv:
        """The subject whose environment stands for the event's (servers, params, stop, meter: all shared)."""
        return self.subjects[0]

    @property
    def waited(self) -> float:
        return self.first.waited


@dataclass
class SubjectOutcome:
    """How one subject ended: its measures, or the exception that ended it alone (a Skip: it does not run)."""

    spec: TrialSpec
    measures: dict | None = None
    failed: BaseException | None = None


@dataclass
class EventOutcome:
    """Every subject's outcome, in the event's order, and what the fault's confirmation found, once for all of them
    (each subject's measures keep it too, in their evidence, as a trial's always have)."""

    subjects: list[SubjectOutcome]
    evidence: dict = field(default_factory=dict)

    def only(self) -> dict:
        """The one subject's measures (an event of one), or its exception raised."""
        (outcome,) = self.subjects
        if outcome.failed is not None:
            raise outcome.failed
        assert outcome.measures is not None  # a SubjectOutcome has one or the other
        return outcome.measures


def trial_of_event(scenario: RunsEvents, env: TrialEnv) -> dict:
    """Scenario.run_trial for an event scenario: the trial as an event of one subject."""
    return scenario.run_event(EventEnv.alone(env)).only()


def event_record_fields(event: EventSpec, outcome: EventOutcome | None) -> dict:
    """What each subject's record keeps of the event it shared: its id, how many subjects it served, and the
    evidence that the fault struck (None when it never did)."""
    return {"id": event.id, "subjects": len(event.subjects),
            "confirmed": None if outcome is None or not outcome.evidence else outcome.evidence}


__all__ = ["EventEnv", "EventOutcome", "EventSpec", "SubjectOutcome", "event_record_fields", "plan_events",
           "trial_of_event"]
