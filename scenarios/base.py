"""What a scenario is: a workload shape, a fault schedule and a trial count, per profile.

A scenario plans its trials (one TrialSpec each, with a stable id so a run can
resume), runs one trial against real servers and returns its measures. It never
formats output: the report does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from enum import Enum
from typing import ClassVar


from backends.base import Backend
from lab.declarations.capabilities import Capability
from lab.checkers import ops
from lab.checkers.judge import judge
from lab.checkers.outcomes import Safety
from lab.checkers.verdict import Verdict
from lab.declarations.columns import Column, FaultColumns
from lab.errors import LockLost
from lab.measures.kinds import Measured
from lab.servers.postgres.drivers import DEFAULT as DEFAULT_DRIVER
from lab.servers.services import Services
from scenarios._pacing_hooks import PacingHooks
from scenarios.events import EventEnv, EventOutcome
# A scenario's trial, re-exported where its readers have always found it.
from scenarios.trial import Skip as Skip, TrialEnv as TrialEnv, TrialSpec as TrialSpec, WaitMeter as WaitMeter



def judged(measures: dict, backend_cls: type[Backend], **figures) -> Verdict:
    """The checkers over a trial's recorded history and final table; figures are what its words quote."""
    final = {int(company): state for company, state in (measures.get("final") or {}).items()}
    ttl = measures.get("ttl_s", measures.get("timeout_s")) if Capability.LEASE_EXPIRY in backend_cls.capabilities else None
    return judge(ops.from_json(measures["history"]), final, measures.get("rows", 0),
                 Capability.EXCLUSION in backend_cls.capabilities, figures, lease_ttl=ttl)


def release_said(backend: Backend) -> str:
    """What a backend's release said: 'released', or the LockLost it raised (a release never lies)."""
    try:
        backend.release()
        return "released"
    except LockLost as exc:
        return f"raised LockLost: {exc}"


class FaultReach(Enum):
    """How many trials one strike of a scenario's fault serves, as the runner plans them (lab/runner/)."""

    ONE_TRIAL = "one trial"  # each trial strikes a fault of its own
    # One event per (variant, repetition) serves every applicable backend, each on a company, a table and keys of
    # its own and judged on its own history (scenarios/events.py): the fault is the same for all of them.
    ONE_EVENT = "one event for many subjects"


class Scenario(PacingHooks, ABC):
    """Base of every experiment; subclasses fill the class attributes and two methods."""

    name: ClassVar[str]
    summary: ClassVar[str]
    requires: ClassVar[frozenset[Capability]] = frozenset()  # backend capabilities it needs
    # Its profiles (params) and how its trials are paced (pacing), with the hooks the runner reads from them: in
    # PacingHooks (scenarios/_pacing_hooks.py).
    variants: ClassVar[tuple[str, ...]] = ("default",)
    # The fault it injects, as the report shows it (lab/declarations/columns.py): a title, and the variants that are
    # columns of the matrix with their headings and legends. A scenario without columns is in no matrix.
    title: ClassVar[str] = ""
    columns: ClassVar[tuple[Column, ...]] = ()
    breaks_leases: ClassVar[bool] = False  # the lease-fault trial shape: in the told and lease tables
    replicated: ClassVar[bool] = False  # the lock service loses one of its servers
    # A managed failover's scripted counterpart (the scenario the report sets it beside), or None.
    control: ClassVar[str | None] = None
    # Whether `lab run` without --scenario runs it: the post's core experiments, about 90 s on 2 cores. The
    # rest (restarts, failovers, the cost table, the kill-point search) take minutes: --scenario all or by name.
    default_run: ClassVar[bool] = False
    # Whether the lock's connection driver changes what this fault does to it (the idle guards, the detector, a
    # paused or cut holder): only such a scenario runs the driver axis (--driver) beside the default driver.
    driver_axis: ClassVar[bool] = False
    # ONE_EVENT: the runner plans one event per variant and repetition for every backend (run_event), not a trial
    # each (run_trial); the profile's `trials` is then the number of events per variant.
    fault_reach: ClassVar[FaultReach] = FaultReach.ONE_TRIAL
    # What its trials measure (lab/measures/kinds.py), recorded in meta.json: a report section finds the trials it
    # renders by it, never by this scenario's name.
    measured: ClassVar[Measured] = Measured.MATRIX_CELL

    @classmethod
    def fault_columns(cls) -> FaultColumns | None:
        """What this scenario declares for the report, or None when it is no fault column."""
        if not cls.columns:
            return None
        return FaultColumns(cls.name, cls.title, cls.columns, cls.breaks_leases, cls.replicated, cls.control)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "variants" not in cls.__dict__ and "columns" in cls.__dict__:  # its columns are its variants
            cls.variants = tuple(c.variant for c in cls.columns)

    def applies_to(self, backend_cls: type[Backend]) -> str | None:
        """None when the scenario can run the backend, else the reason it cannot."""
        missing = self.requires - backend_cls.capabilities
        if missing:
            return f"needs {', '.join(sorted(missing))}"
        return None

    def variants_for(self, backend_cls: type[Backend]) -> tuple[str, ...]:
        """The variants that exist for this backend (a cost configuration belongs to one backend)."""
        return self.variants

    def variants_in_profile(self, backend_cls: type[Backend], profile: str) -> tuple[str, ...]:
        """variants_for, less those the profile leaves out: a profile may list its variants in its params
        (netdrop's OS-default keepalives take two hours a trial, so only the full profile lists them)."""
        listed = self.profile_params(profile).get("variants")
        return tuple(v for v in self.variants_for(backend_cls) if listed is None or v in listed)

    def variant_skip(self, variant: str, backend_cls: type[Backend]) -> str | None:
        """None when this variant can run the backend, else the reason it cannot (recorded as n/a)."""
        return None

    def plan_drivers(self, backend_classes: list[type[Backend]], profile: str,
                     drivers: list[str]) -> list[TrialSpec]:
        """plan() once per driver: on a scenario that declares the driver axis, a backend whose lock is on
        PostgreSQL and more than one driver runs on each other driver (a row of its own, `session@asyncpg`, n/a
        with the reason on a driver it has no form on); a lock with one driver, or whose lock is elsewhere, has no
        driver axis and runs once. A
        scenario without the axis runs every backend once, on the default driver."""
        specs = []
        other = [d for d in drivers if d != DEFAULT_DRIVER] if self.driver_axis else []
        if DEFAULT_DRIVER in drivers or not self.driver_axis:
            specs += self.plan(backend_classes, profile)
        else:  # locks with no driver axis still run, once
            specs += self.plan([c for c in backend_classes if c.lock_service != "postgres"], profile)
        on_axis = [c for c in backend_classes if c.lock_service == "postgres" and len(c.drivers) > 1]
        for driver in other:
            runnable = [c for c in on_axis if c.driver_skip(driver) is None]
            specs += [replace(spec, driver=driver) for spec in self.plan(runnable, profile)]
            specs += [TrialSpec(self.name, c.name, "-", 0, skip=c.driver_skip(driver), driver=driver)
                      for c in on_axis if c.driver_skip(driver) is not None]
        return specs

    def plan(self, backend_classes: list[type[Backend]], profile: str) -> list[TrialSpec]:
        """Every trial of this scenario for these backends, skipped ones included.

        Trials are listed repetition by repetition (A B A B, not A A B B), so that a
        scenario run one trial at a time interleaves its configurations.
        """
        trials = self.profile_params(profile)["trials"]
        specs: list[TrialSpec] = []
        skipped: list[TrialSpec] = []
        for cls in backend_classes:
            reason = self.applies_to(cls)
            if reason is not None:
                skipped.append(TrialSpec(self.name, cls.name, "-", 0, skip=reason))
                continue
            for variant in self.variants_in_profile(cls, profile):
                reason = self.variant_skip(variant, cls)
                if reason is not None:
                    skipped.append(TrialSpec(self.name, cls.name, variant, 0, skip=reason))
        runnable = [(cls.name, v) for cls in backend_classes if self.applies_to(cls) is None
                    for v in self.variants_in_profile(cls, profile) if self.variant_skip(v, cls) is None]
        # The sequential rule adds trials per cell; an event serves every backend's cell at once, so a scenario of
        # shared events runs its profile's count and no more.
        extra = self.pacing.extra_trials_when_varied if self.fault_reach is FaultReach.ONE_TRIAL else 0
        counts = {variant: self.variant_trials(variant, trials) + extra for _, variant in runnable}
        for index in range(max(counts.values(), default=0)):
            specs.extend(TrialSpec(self.name, backend, variant, index) for backend, variant in runnable
                         if index < counts[variant])
        return skipped + specs

    def trials_scope(self, services: Services, profile: str, trials: int) -> AbstractContextManager[None]:
        """What the scenario holds while its `trials` runnable trials run, opened before the first and closed after
        the last (servers started ahead of the trials that take them: lab/servers/ready_ahead.py). Nothing by
        default; run_trial must work without it, as a test calls it alone."""
        return nullcontext()

    @abstractmethod
    def run_trial(self, env: TrialEnv) -> dict:
        """Run one trial for real and return its measures."""

    def run_event(self, env: EventEnv) -> EventOutcome:
        """Run one event for real (a FaultReach.ONE_EVENT scenario): the fault struck once for every subject, each
        subject's measures or its own error. Raising ends every subject alike (a Skip: none of them runs here)."""
        raise NotImplementedError(f"{self.name} strikes its fault once per trial (fault_reach {self.fault_reach.value})")

    def judge(self, measures: dict, backend_cls: type[Backend]) -> Verdict | None:
        """The trial's typed verdict from the one set of checkers (lab/checkers/judge.py): a scenario whose
        measures carry a `history` and a `final` table returns judged(measures, backend_cls); None for one
        that measures cost or throughput, not safety, and words its own outcome in verdict()."""
        return None

    def verdict(self, measures: dict) -> str:
        """The outcome word of a scenario that measures something other than safety (cost, throughput)."""
        raise NotImplementedError(f"{self.name} records neither a history for the checkers nor a verdict of its own")

    def safety(self, measures: dict, verdict: str) -> Safety:
        """The safety of a scenario that words its own outcome: it measures cost, throughput or a rule of the
        post's (a deadlock, a timer), never a lost lock, which only the checkers judge; one that can harm
        a company (whynot) says how."""
        return Safety.SAFE

    def exercised(self, measures: dict) -> bool | None:
        """Whether the fault took the lock (or the write's session) away; None when the scenario cannot say.

        A cell that was never exercised is not a pass: the report shows it apart.
        """
        return measures.get("exercised")
