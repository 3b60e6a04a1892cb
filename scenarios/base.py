"""What a scenario is: a workload shape, a fault schedule and a trial count, per profile.

A scenario plans its trials (one TrialSpec each, with a stable id so a run can
resume), runs one trial against real servers and returns its measures. It never
formats output: the report does.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from sqlalchemy.engine import Engine

from backends import load as load_backend
from backends.base import Backend, BackendContext
from lab.capabilities import Capability
from lab.checkers import ops
from lab.checkers.judge import judge
from lab.checkers.outcomes import Safety
from lab.checkers.verdict import Verdict
from lab.columns import Column, FaultColumns
from lab.errors import Interrupted, LockLost
from lab.measures.kinds import Measured
from lab.servers.postgres.drivers import DEFAULT as DEFAULT_DRIVER
from lab.servers.services import Services
from lab.workload.table import CompanyTable, table_name
from scenarios._pacing_hooks import PacingHooks

if TYPE_CHECKING:
    from scenarios.events import EventEnv, EventOutcome


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


class Skip(Exception):
    """Raised by a trial that cannot run here (e.g. a server too old for a setting)."""


@dataclass(frozen=True)
class TrialSpec:
    """One planned trial; its id is stable across runs of the same plan."""

    scenario: str
    backend: str
    variant: str
    index: int
    skip: str | None = None
    driver: str = DEFAULT_DRIVER  # how the lock's PostgreSQL connection is made (lab/servers/postgres/drivers.py)

    @property
    def label(self) -> str:
        """The backend as results name it: with its driver when that is not the default."""
        return self.backend if self.driver == DEFAULT_DRIVER else f"{self.backend}@{self.driver}"

    @property
    def id(self) -> str:
        return f"{self.scenario}/{self.label}/{self.variant}/{self.index}"


class WaitMeter:
    """Seconds a trial spent waiting on its timers, waits on several of its threads at once counted once."""

    def __init__(self) -> None:
        self.total = 0.0
        self._in_progress = 0
        self._since = 0.0
        self._lock = threading.Lock()

    def begins(self) -> None:
        with self._lock:
            if self._in_progress == 0:
                self._since = time.monotonic()
            self._in_progress += 1

    def ends(self) -> None:
        with self._lock:
            self._in_progress -= 1
            if self._in_progress == 0:
                self.total += time.monotonic() - self._since


@dataclass
class TrialEnv:
    """What a running trial may use: servers, shared pools, a unique key space, and the stop flag."""

    services: Services
    monitor: Engine
    writes: Engine
    run_id: str
    spec: TrialSpec
    params: dict
    stop: threading.Event = field(default_factory=threading.Event)
    results_dir: Path | None = None  # the run's folder, for files a trial keeps (hypothesis' examples)
    # The timers it sat through in pause/wait_until, which no scheduler can shorten (lower_bound in
    # lab/runner/pacing.py). One meter per trial, shared by the copies a scenario makes with dataclasses.replace
    # (its own servers).
    meter: WaitMeter = field(default_factory=lambda: WaitMeter(), repr=False)

    @property
    def waited(self) -> float:
        """Seconds this trial spent in pause/wait_until, its threads' waits overlapping counted once."""
        return self.meter.total

    def options(self, options: dict | None = None) -> dict:
        """A backend's options for this trial: the given ones, and its driver when not the default."""
        driver = {} if self.spec.driver == DEFAULT_DRIVER else {"driver": self.spec.driver}
        return {**driver, **(options or {})}

    def key(self, suffix: str = "lock") -> str:
        """A lock name no other trial, run or user of the database shares."""
        return f"locklab:{self.run_id}:{self.spec.id}:{suffix}"

    def backend(self, name: str | None = None, *, lock_settings: dict | None = None,
                table: CompanyTable | None = None, key: str | None = None,
                options: dict | None = None, writes: Engine | None = None,
                routed: Services | None = None) -> Backend:
        """A new instance of the trial's backend (a holder or a contender); writes defaults to the shared pool.

        routed: where its lock connection goes instead of the servers themselves (a fault's proxy).
        """
        cls = load_backend(name or self.spec.backend)
        ctx = BackendContext(self.services, self.monitor, writes or self.writes, table,
                             dict(lock_settings or {}), self.options(options), routed=routed)
        return cls(ctx, key or self.key())

    def contender_gets_in(self, **backend_kwargs) -> bool:
        """A second run tries once for the lock: True if it got it (and then gave it back). A release that
        raises LockLost does not undo the grant it answers for: its lease may have lapsed meanwhile, or its
        library failed to say (measured: aioredlock's get_lock raised IndexError in 4 of 20 of one backend's
        timing trials in a full run, which had made those trials errors)."""
        contender = self.backend(**backend_kwargs)
        try:
            got = contender.acquire()
            if got:
                try:
                    contender.release()
                except LockLost:
                    pass
            return got
        finally:
            contender.close()

    def table(self, label: str = "rows", index: bool = True) -> CompanyTable:
        """A fresh company_rows table of this trial's own (dropped with the lab's schema)."""
        table = CompanyTable(table_name(f"{self.run_id}_{self.spec.id}_{label}"))
        table.create(self.monitor, index=index)
        return table

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """A wait no scheduler can shorten that is not one of the trial's own sleeps: a fault striking and being
        confirmed (a server restarting, a replica promoted), a contender trying for its declared patience.
        Counted in the trial's floor, as pause() is (lab/runner/pacing.py lower_bound)."""
        self.meter.begins()
        try:
            yield
        finally:
            self.meter.ends()

    def pause(self, seconds: float) -> None:
        """Hold for seconds (a run keeping its transaction open), waking at once if the run is stopped."""
        self.wait_until(time.monotonic(), seconds)

    def wait_until(self, t0: float, seconds: float) -> None:
        """Sleep until t0 + seconds on the monotonic clock, waking at once if the run is stopped."""
        remaining = t0 + seconds - time.monotonic()
        if remaining <= 0:
            return
        self.meter.begins()
        try:
            stopped = self.stop.wait(remaining)
        finally:
            self.meter.ends()
        if stopped:
            raise Interrupted()


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
    # The fault it injects, as the report shows it (lab/columns.py): a title, and the variants that are
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
