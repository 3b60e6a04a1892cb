"""The one record a trial leaves in trials.jsonl: which trial it was, how it ended, and its verdict.

Skipped, finished and broken trials share one typed shape (TrialRecord), and a finished trial's verdict
comes from one place (outcome_fields), so the executor and the tests build records the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TypedDict, cast

from lab.checkers import ops
from lab.checkers.outcomes import SkipKind, skip_kind_of
from lab.checkers.words import verdict_text
from lab.servers.postgres.drivers import DEFAULT as DEFAULT_DRIVER
from scenarios.base import Scenario, TrialSpec


class Outcome(TypedDict, total=False):
    """What a finished trial's measures mean: schema 2 adds the typed judgement and the history behind it."""

    verdict: str
    safety: str
    exercised: bool | None  # None: the scenario does not say (no fault to take the lock away); left out of the record
    judgement: dict
    history: list
    schema: int


class TrialRecord(TypedDict, total=False):
    """One line of trials.jsonl (RunFolder writes its keys sorted); a field that would be None is left out."""

    id: str
    scenario: str
    backend: str  # with its driver when that is not the default: "session@asyncpg"
    variant: str
    index: int
    status: str  # ok, skipped or error
    driver: str
    runs_here: bool  # a skip only: n/a here, or (False) cannot work here at all, or the lab cannot run it
    skip: str  # a skip only: its SkipKind (n/a, does not run, not run)
    schema: int
    measures: dict
    verdict: str
    judgement: dict
    history: list
    reason: str
    trace: str
    safety: str
    exercised: bool
    started: float
    duration: float
    event: dict  # a subject of a shared fault event only: the event's id, its subject count, its fault's evidence


# After the trial's identity, the optional fields in the order records have always had them.
_OPTIONAL = ("schema", "measures", "verdict", "judgement", "history", "reason", "trace", "safety", "exercised",
             "started", "duration", "event")


@dataclass(frozen=True)
class Started:
    """When a trial started: the wall clock for its record, the monotonic clock for its duration."""

    wall: float = field(default_factory=time.time)
    mono: float = field(default_factory=time.monotonic)

    def timing(self) -> dict:
        """started and duration as a record keeps them (ms), the duration up to now."""
        return {"started": round(self.wall, 3), "duration": round(time.monotonic() - self.mono, 3)}


def skipped(spec: TrialSpec, reason: str, event: dict | None = None) -> TrialRecord:
    """A trial that did not run: its backend does not apply (n/a), cannot work here (DoesNotRun) or the lab cannot
    run it (NotRun). event: the shared fault event it was a subject of (scenarios/events.py), if any."""
    record = _identity(spec, "skipped")
    kind = skip_kind_of(reason)
    record["runs_here"] = kind is SkipKind.NOT_APPLICABLE
    record["skip"] = kind.value
    return _with(record, reason=reason, event=event)


def ok(spec: TrialSpec, measures: dict, outcome: Outcome, timing: dict | None = None,
       event: dict | None = None) -> TrialRecord:
    """A finished trial: its measures and what they mean (outcome_fields), timed by Started.timing()."""
    return _with(_identity(spec, "ok"), measures=measures, **outcome, **(timing or {}), event=event)


def error(spec: TrialSpec, reason: str, trace: str, timing: dict, event: dict | None = None) -> TrialRecord:
    """A trial that broke: one broken trial does not end the run, it is recorded with its traceback."""
    return _with(_identity(spec, "error"), reason=reason, trace=trace, **timing, event=event)


def outcome_fields(scenario: Scenario, measures: dict, backend_cls) -> Outcome:
    """A finished trial's verdict, safety and exercised: from the checkers over its history where the scenario
    records one (then the history and the typed verdict are kept beside them, schema 2), else the
    scenario's own words for what it measured."""
    verdict = scenario.judge(measures, backend_cls)
    if verdict is not None:
        history = measures.pop("history")
        return {"verdict": verdict_text(verdict), "safety": verdict.safety.value, "exercised": verdict.exercised,
                "judgement": verdict.to_json(), "history": history, "schema": ops.SCHEMA}
    words = scenario.verdict(measures)
    safety = scenario.safety(measures, words)
    return {"verdict": words, "safety": getattr(safety, "value", safety), "exercised": scenario.exercised(measures)}


def _identity(spec: TrialSpec, status: str) -> TrialRecord:
    # A backend on another driver than the default is its own row everywhere: "session@asyncpg".
    record: TrialRecord = {"id": spec.id, "scenario": spec.scenario, "backend": spec.label, "variant": spec.variant,
                           "index": spec.index, "status": status}
    if spec.driver != DEFAULT_DRIVER:
        record["driver"] = spec.driver
    return record


def _with(record: TrialRecord, **optional) -> TrialRecord:
    unknown = optional.keys() - set(_OPTIONAL)
    if unknown:
        raise TypeError(f"not a field of a trial record: {', '.join(sorted(unknown))}")
    # The names were checked against the record's fields just above; mypy cannot follow a computed key.
    record.update(cast(TrialRecord, {name: optional[name] for name in _OPTIONAL if optional.get(name) is not None}))
    return record
