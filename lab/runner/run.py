"""Runner: one run end to end: servers, capacity, meta.json, then each scenario in its lane.

What is left here is the order of things and what must hold whatever happens (every server it started
is stopped); resuming, lanes, the trial pool and trial records are the modules beside it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import backends
from lab import preflight
from lab.records import host_cpu
from lab.holder import forks
from lab.declarations.pacing import Exclusive, Lane
from lab.runner.provenance import run_meta
from lab.runner.quiet import LibraryNoise
from lab.records.results import RunFolder
from lab.runner import pacing
from lab.runner import waves as capacity_plan
from lab.runner.context import RunContext
from lab.runner.events import event_alone, event_cost, run_events
from lab.runner.lanes import OWN_SERVER_LANES, SHARED_LANES, composed, run_lanes, schedule
from lab.runner.meta import META_LOCK
from lab.runner.plan import Plan, RunRequest, SettleAsk, make_plan, mark_unrunnable
from lab.runner.progress import ScenarioProgress, wall_over_bound
from lab.runner.resume import resumed
from lab.runner.settle import Settling, record_asked, settle_phase
from lab.runner.stores import close_stores, open_stores
from lab.runner.trials import run_trials
from lab.servers.clients import redact
from lab.servers.postgres import sql as pg
from lab.servers.postgres.capacity import Capacity, SessionSampler, read_capacity
from lab.servers.services import SERVICE_NAMES, Services, start_services
from lab.workload.table import drop_schema, ensure_schema
from scenarios.base import FaultReach, Scenario, TrialSpec
from scenarios.events import plan_events


class Runner:
    """Runs one plan end to end; stops every server it started, whatever happens."""

    def __init__(self, request: RunRequest, console: Console | None = None, gate: preflight.Gate | None = None):
        """gate: the preflight, when the caller looked at the addresses ahead (lab/preflight/look.py)."""
        self.request = request  # on resume, replaced by the request the run was started with
        self.gate = gate or preflight.Gate()
        self.console = console or Console(stderr=True)
        self.stop = threading.Event()
        self.folder: RunFolder | None = None  # set once the run's folder exists
        self.waves: dict[str, capacity_plan.Wave] = {}  # scenario -> how many trials at once
        # The settling asked (lab/runner/settle.py) and each scenario's waves over every cell it may add trials to.
        self.settling: tuple[Settling, dict[str, capacity_plan.Wave]] | None = None

    def execute(self) -> RunFolder:
        if self.request.resume:
            folder = RunFolder.open(self.request.results_root, self.request.resume)
            self.request, done = resumed(self.request, folder)
        else:
            folder, done = None, frozenset()
        req = self.request
        plan = make_plan(req, done)
        recorded = folder.meta().get("settle") if folder is not None else None
        settling = Settling.asked(req.settle or SettleAsk(), recorded).resolved(req.results_root) \
            if req.settle or recorded else None
        # What the run may still run: its pending trials, and with settling every cell of the plan (a resumed run
        # whose planned trials are all done may still add trials to any of them).
        reach = plan if settling is None or not done else make_plan(req)

        # Servers first: a bad address must fail before anything is written under results/.
        # An address the user gave is checked even when no chosen backend needs it, and what sits there is looked at
        # before any server of the lab's own starts: one the lab cannot measure through (a transaction pooler, a
        # standby, a read-only role) ends the run in one line (lab/preflight).
        given = {name for name in SERVICE_NAMES if req.external.given(name)}
        gate = self.gate
        services = start_services(reach.services | given, req.external, check=gate)
        services.fault_commands = dict(req.fault_commands)
        if services.swept:
            self.console.print(f"removed the temp dirs of lab runs that were killed: {', '.join(services.swept)}")
        for note in gate.found.notes():
            self.console.print(note, highlight=False)
        try:
            # Capacity before work: a server that cannot give one trial its sessions refuses the run here.
            looked = gate.found.postgres  # the preflight read it on a PostgreSQL the lab was given
            capacity = looked.capacity if looked is not None else read_capacity(services.pg())
            self.waves = {w.scenario: w for w in capacity_plan.fit(plan.demands(req.profile), capacity,
                                                                   redact(services.pg()))}
            for wave in self.waves.values():
                if wave.limited:
                    self.console.print(capacity_plan.describe(wave, capacity))
            if folder is None:
                folder = RunFolder.create(req.results_root, run_meta(req, services))
            else:
                _set_bounds_aside(folder)
            _record_capacity(folder, capacity, self.waves)
            _record_preflight(folder, gate.found)
            self.folder = folder
            if settling is not None:
                record_asked(folder, settling, req)
                self.settling = (settling, {w.scenario: w for w in capacity_plan.fit(
                    reach.demands(req.profile), capacity, redact(services.pg()))})
            shared = f" ({plan.events} shared fault events among them)" if plan.events else ""
            self.console.print(f"run [bold]{folder.run_id}[/] ({req.profile}): {plan.total} trials{shared}; "
                               f"servers: " + ", ".join(f"{n} {d['address']}" + (" (embedded)" if d["embedded"] else "")
                                                        for n, d in services.describe().items()))
            with LibraryNoise(folder.path / "libraries.log") as noise:
                try:
                    self._run_plan(plan, services, folder, reach)
                finally:
                    if noise.summary():
                        self.console.print(noise.summary())
            return folder
        finally:
            self.stop.set()
            services.stop()

    def _run_plan(self, plan: Plan, services: Services, folder: RunFolder, reach: Plan) -> None:
        """The planned trials, then (when asked) the added ones; reach: every trial the run may still run (the
        plan, or with settling on a resumed run every cell of it), for the stores it writes to."""
        monitor, writes = pg.monitor_engine(services), pg.writes_engine(services)
        ensure_schema(monitor)
        backends.prepare_storage(monitor, self.request.backends)
        mark_unrunnable(plan, services, self.console)
        if reach is not plan:
            mark_unrunnable(reach, services, Console(quiet=True))  # said once, for the plan
        stores = open_stores(reach, services, self.request.backends)
        sampler = SessionSampler(services.pg())
        # Holders forked from one process that imported once, their backends' libraries too.
        forks.open_server([backends.entry(name) for name in self.request.backends])
        try:
            with Progress(TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), TextColumn("{task.fields[left]}"), console=self.console,
                          transient=False,
                          disable=not self.console.is_terminal) as progress:
                ctx = RunContext(profile=self.request.profile, plan=plan, services=services, monitor=monitor,
                                 writes=writes, folder=folder, progress=progress, sampler=sampler, stop=self.stop,
                                 waves=self.waves, stores=stores)
                lanes = shared_lanes(plan.scenarios, plan.pending, services, self.waves)
                phases = schedule(plan.scenarios, _estimates(ctx), lanes,
                                  shared_ceiling(plan.scenarios, lanes, self.waves))
                started, host = time.monotonic(), host_cpu.Window()
                for phase in phases:
                    run_lanes(phase, lambda scenario: _run_scenario(ctx, scenario), self.stop)
                _record_run_bound(folder, phases, time.monotonic() - started, host.stolen(), self.console)
                if self.settling is not None:
                    settling, waves = self.settling
                    settled = shared_lanes(reach.scenarios, reach.pending, services, waves)
                    settle_phase(ctx, reach, settling, waves, self.request.results_root,
                                 (settled, shared_ceiling(reach.scenarios, settled, waves)))
        finally:
            forks.close_server()
            sampler.close()
            if not self.stop.is_set():
                drop_schema(monitor)
            monitor.dispose()
            writes.dispose()
            close_stores(stores, dropping=not self.stop.is_set())


def shared_lanes(scenarios: list[Scenario], pending: dict[str, list[TrialSpec]], services: Services,
                 waves: dict[str, capacity_plan.Wave]) -> int:
    """SHARED_LANES for the run's-server scenarios, or one lane when they would reach one another: one of their
    trials acts on a server the others share (it declares itself exclusive: a restart of a server the lab was
    given), or the two that would hold the most PostgreSQL sessions could not hold them together."""
    shared = [s for s in scenarios if s.pacing.lane is Lane.SHARED]
    for scenario in shared:
        if scenario.pacing.exclusive is Exclusive.PER_TRIAL and any(
                scenario.exclusive(spec, services) for spec in pending.get(scenario.name, []) if spec.skip is None):
            return 1
    fitted = sorted((waves[s.name] for s in shared if s.name in waves), key=lambda w: -w.would_use)
    if len(fitted) >= 2 and fitted[0].would_use + fitted[1].would_use > fitted[0].budget:
        return 1
    return SHARED_LANES


def shared_ceiling(scenarios: list[Scenario], lanes: int, waves: dict[str, capacity_plan.Wave]) -> int:
    """How many run's-server scenarios may run at once when the other lanes are free: none beyond their `lanes` where
    those are one (a trial of theirs reaches the others' server), else as many as all of the phase's lanes while
    the ones that would hold the most PostgreSQL sessions fit the server's budget together."""
    if lanes <= 1:
        return lanes
    fitted = sorted((waves[s.name] for s in scenarios if s.pacing.lane is Lane.SHARED and s.name in waves),
                    key=lambda w: -w.would_use)
    ceiling = lanes
    while ceiling < lanes + OWN_SERVER_LANES and (len(fitted) <= ceiling or sum(
            w.would_use for w in fitted[:ceiling + 1]) <= fitted[0].budget):
        ceiling += 1
    return ceiling


def _estimates(ctx: RunContext) -> dict[str, float]:
    """Each scenario's own guess of its seconds from its profile and its runnable trials (or events): a pool's lanes
    take the longest first (lab/runner/lanes.py)."""
    out = {}
    for scenario in ctx.plan.scenarios:
        runnable = [spec for spec in ctx.plan.pending[scenario.name] if spec.skip is None]
        units = Units.of(ctx, scenario, runnable)
        out[scenario.name] = pacing.estimate_seconds(scenario, ctx.profile, len(units.costs),
                                                     scenario.parallelism(ctx.profile), sum(units.alone))
    return out


@dataclass(frozen=True)
class Units:
    """What a scenario runs, as its bound and progress count it: its runnable trials, or (a FaultReach.ONE_EVENT
    scenario) its events, each counted once however many subjects it serves; with each one's session cost and
    whether it runs alone."""

    costs: list[int]
    alone: list[bool]
    events: int | None = None  # None: the units are trials

    @classmethod
    def of(cls, ctx: RunContext, scenario: Scenario, runnable: list[TrialSpec]) -> Units:
        if scenario.fault_reach is FaultReach.ONE_EVENT:
            events = plan_events(runnable)
            return cls([event_cost(ctx, scenario, e) for e in events],
                       [event_alone(scenario, e, ctx.services) for e in events], len(events))
        return cls([ctx.plan.cost(scenario, spec, ctx.profile) for spec in runnable],
                   [pacing.exclusive(scenario, spec, ctx.services) for spec in runnable])


def _run_scenario(ctx: RunContext, scenario: Scenario) -> None:
    """One scenario: its progress line or bar, its trials (or events), and afterwards what it used and how long it
    took."""
    specs = ctx.plan.pending[scenario.name]
    wave = ctx.wave(scenario)
    runnable = [spec for spec in specs if spec.skip is None]
    units = Units.of(ctx, scenario, runnable)
    at_once = max(1, scenario.parallelism(ctx.profile))
    if wave is not None and wave.limited:
        at_once = max(1, -(-at_once // wave.waves))
    shown = ScenarioProgress(ctx.progress.console, ctx.progress, scenario.name, len(specs),
                             pacing.estimate_seconds(scenario, ctx.profile, len(units.costs), at_once, sum(units.alone))
                             if runnable else None,
                             at_once, events=units.events)
    # The run's PostgreSQL sessions are sampled for the scenarios that use them; a scenario on servers
    # of its own runs beside one that does, and must not take that one's peak.
    samples = scenario.pacing.lane is not Lane.OWN_SERVERS
    if samples:
        ctx.sampler.take_peak()
    host = host_cpu.Window()  # the whole machine's: beside another lane, what both lanes had
    with scenario.trials_scope(ctx.services, ctx.profile, len(units.costs)):
        if units.events is not None:
            finished = run_events(ctx, scenario, shown)
        else:
            finished = run_trials(ctx, scenario, shown, {spec.id: alone for spec, alone in zip(runnable, units.alone)})
    stolen = host.stolen()
    sessions = wave.budget if wave is not None else None
    floors, costs = [f.seconds for f in finished.floors], [f.sessions for f in finished.floors]
    bound = pacing.lower_bound(scenario, ctx.profile, floors, costs, sessions, [f.alone for f in finished.floors]) \
        if floors else None
    wall = shown.finish(bound, stolen)
    if runnable and not ctx.stop.is_set():  # a resumed run's scenario with nothing left to run is not timed
        _record_bound(ctx.folder, scenario.name, {
            "lane": scenario.pacing.lane.value, "wall_s": round(wall, 1), "bound_s": round(bound or 0.0, 1),
            "declared_bound_s": round(pacing.declared_bound(scenario, ctx.profile, units.costs, sessions, units.alone),
                                      1),
            "trials_alone": sum(units.alone),
            "trials_finished": len(floors), "at_once": pacing.at_once(scenario, ctx.profile, units.costs, sessions),
            "trial_floor_s": pacing.trial_floor(scenario, ctx.profile),
            **({} if units.events is None else {"events": units.events, "subjects": len(runnable)}),
            **({} if stolen is None else {"cpu_stolen": round(stolen, 3)})})
        precision = scenario.precision(ctx.profile, finished.records)
        if precision is not None:
            _record_precision(ctx.folder, scenario.name, precision)
    if samples and wave is not None and not ctx.stop.is_set():
        _record_peak(ctx.folder, scenario.name, ctx.sampler.take_peak())
    window = scenario.wall_budget(ctx.profile)
    if window and wave is not None:
        wall = time.monotonic() - shown.started
        limited = f"; about {wave.waves} waves for the server's connections" if wave.limited else ""
        ctx.progress.console.print(f"{scenario.name}: {wall:.1f} s for a {window:.0f} s observation "
                                   f"window ({wall / window:.2f}x{limited})")


BOUND_RULE = ("a scenario's bound is the least wall time any schedule of its finished trials could take: the "
              "longest trial's floor, the floors' sum over the trials it may run at once, and their session-seconds "
              "over the server's session budget; a trial's floor is its declared timers (or the longer waits it sat "
              "through) plus the seconds inside its own measurement, never more than it took. The run's bound adds "
              "the phases, each as long as its longest lane when each pool's lanes take its scenarios in order.")


def _set_bounds_aside(folder) -> None:
    """A resumed run times only what it runs: the earlier part's walls and bounds are kept in bounds_earlier."""
    with META_LOCK:
        meta = folder.meta()
        if meta.get("bounds"):
            meta.setdefault("bounds_earlier", []).append(meta.pop("bounds"))
            folder.write_meta(meta)


def _record_bound(folder, scenario: str, entry: dict[str, Any]) -> None:
    """meta.json keeps each scenario's wall time beside its lower bound (a resumed run's part: _set_bounds_aside)."""
    with META_LOCK:
        meta = folder.meta()
        meta.setdefault("bounds", {"rule": BOUND_RULE, "scenarios": {}})["scenarios"][scenario] = entry
        folder.write_meta(meta)


def _record_precision(folder, scenario: str, precision: dict) -> None:
    """meta.json keeps how a scenario's repetitions ended (its precision rule's outcome), for the report."""
    with META_LOCK:
        meta = folder.meta()
        meta.setdefault("precision", {})[scenario] = precision
        folder.write_meta(meta)


def _record_run_bound(folder, phases, wall: float, stolen: float | None, console) -> None:
    """The run's wall time beside its bound, composed over the lanes as they ran (lab/runner/lanes.py), and the
    share of the CPU the host took meanwhile (lab/records/host_cpu.py)."""
    with META_LOCK:
        meta = folder.meta()
        bounds = meta.get("bounds")
        if not bounds:
            return
        per = bounds["scenarios"]
        bound = composed(phases, {name: entry["bound_s"] for name, entry in per.items()})
        bounds["run"] = {"wall_s": round(wall, 1), "bound_s": round(bound, 1),
                         "lanes_wall_s": round(composed(phases, {n: e["wall_s"] for n, e in per.items()}), 1),
                         **({} if stolen is None else {"cpu_stolen": round(stolen, 3)})}
        folder.write_meta(meta)
    console.print(f"run: wall / bound {wall_over_bound(wall, bound)}{host_cpu.describe(stolen)}", highlight=False,
                  soft_wrap=True)


def _record_capacity(folder: RunFolder, capacity: Capacity, waves: dict[str, capacity_plan.Wave]) -> None:
    """meta.json keeps the server's limits and each scenario's plan (a resumed run adds its own)."""
    meta = folder.meta()
    meta.setdefault("capacity", []).append({"server": capacity.as_dict(),
                                            "waves": {n: w.as_dict() for n, w in waves.items()}})
    folder.write_meta(meta)


def _record_preflight(folder: RunFolder, found: preflight.Preflight) -> None:
    """meta.json keeps what sat at each address given (a resumed run: what it found this time)."""
    if found.findings:
        meta = folder.meta()
        meta["preflight"] = found.to_json()
        folder.write_meta(meta)


def _record_peak(folder: RunFolder, scenario: str, peak: tuple[int, dict]) -> None:
    """What the scenario really used, beside what was planned: evidence that the plan held."""
    with META_LOCK:
        meta = folder.meta()
        wave = meta["capacity"][-1]["waves"][scenario]
        wave["peak_sessions_on_server"], wave["peak_by_application"] = peak
        folder.write_meta(meta)
