"""What a run was asked (RunRequest) and the trials that answer it (Plan): which still run, and what they need.

Apart from running them so that resume, capacity and the services can be worked out before a trial starts.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.console import Console

import backends
import scenarios
from lab.checkers.outcomes import DoesNotRun, NotRun
from lab.runner import waves as capacity_plan
from lab.servers.postgres.drivers import DEFAULT as DEFAULT_DRIVER
from lab.servers.services import ExternalAddresses, Services
from lab.workload.contract import describe_error
from scenarios.base import FaultReach, Scenario, TrialSpec
from scenarios.events import plan_events


@dataclass(frozen=True)
class SettleAsk:
    """What `lab run --settle` asked (lab/runner/settle.py): minutes of budget (None: the default, or on a resume
    what is left of the recorded budget) and the previous references' folders or run ids (None: as a resumed run
    recorded them, else the committed reference)."""

    minutes: float | None = None
    previous: tuple[str, ...] | None = None


@dataclass
class RunRequest:
    backends: list[str]
    scenarios: list[str]
    profile: str
    results_root: Path
    external: ExternalAddresses = field(default_factory=ExternalAddresses)
    argv: list[str] = field(default_factory=list)
    resume: str | None = None
    extra_backends: list[str] = field(default_factory=list)  # --backend-module specs, re-registered on resume
    fault_commands: dict[str, str] = field(default_factory=dict)  # --fault-command: the user's own fault commands
    drivers: list[str] = field(default_factory=lambda: [DEFAULT_DRIVER])  # --driver: the lock connection's driver
    settle: SettleAsk | None = None  # --settle: trials added where the answer depends on them; None: none asked


@dataclass
class Plan:
    """The trials still to run, grouped by scenario, and the services they need."""

    scenarios: list[Scenario]
    pending: dict[str, list[TrialSpec]]

    @property
    def services(self) -> set[str]:
        needed = {"postgres"}  # the workload and the report's evidence live there
        for specs in self.pending.values():
            for spec in specs:
                if spec.skip is None:
                    needed.update(backends.load(spec.backend).services)
        return needed

    @property
    def total(self) -> int:
        return sum(len(specs) for specs in self.pending.values())

    @property
    def events(self) -> int:
        """How many shared fault events the runnable trials of FaultReach.ONE_EVENT scenarios make."""
        return sum(len(plan_events(self.pending[s.name])) for s in self.scenarios
                   if s.fault_reach is FaultReach.ONE_EVENT)

    def cost(self, scenario: Scenario, spec: TrialSpec, profile: str) -> int:
        """PostgreSQL sessions one trial holds at most."""
        return scenario.pg_sessions(backends.load(spec.backend), profile)

    def demands(self, profile: str) -> list[capacity_plan.Demand]:
        """What each scenario's runnable trials ask of the server, for lab/runner/waves.py."""
        return [capacity_plan.Demand(s.name, tuple(self.cost(s, spec, profile) for spec in self.pending[s.name]
                                                   if spec.skip is None), max(1, s.parallelism(profile)))
                for s in self.scenarios]


def make_plan(request: RunRequest, done: AbstractSet[str] = frozenset()) -> Plan:
    """The request's trials, in plan order, but those already done (a resumed run's finished ones)."""
    classes = [backends.load(name) for name in request.backends]
    chosen = [scenarios.load(name) for name in request.scenarios]
    drivers = request.drivers or [DEFAULT_DRIVER]
    pending = {s.name: [spec for spec in s.plan_drivers(classes, request.profile, drivers) if spec.id not in done]
               for s in chosen}
    return Plan(chosen, pending)


def mark_unrunnable(plan: Plan, services: Services, console: Console) -> None:
    """A backend whose library cannot work against these servers: its trials are recorded as skipped."""
    reasons = {}
    for name in {spec.backend for specs in plan.pending.values() for spec in specs if spec.skip is None}:
        try:
            reason = backends.load(name).cannot_run(services)
        except Exception as exc:  # a plugin's own check failing says as much about it
            reason = describe_error(exc)
        if reason is not None:
            reasons[name] = reason if isinstance(reason, (DoesNotRun, NotRun)) else DoesNotRun(reason)  # typed: kept
            console.print(f"{name} {reasons[name]}")
    for scenario_name, specs in plan.pending.items():
        plan.pending[scenario_name] = [replace(spec, skip=reasons[spec.backend])
                                       if spec.skip is None and spec.backend in reasons else spec
                                       for spec in specs]
