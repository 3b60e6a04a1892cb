"""Plan the trials of a run, start the servers they need, run them, and keep every finished one.

Data flows one way: cli -> runner -> scenario -> (backend, faults, checkers) -> results.
"""

from __future__ import annotations

import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

import backends
from lab.errors import Interrupted
from lab.harness.contract import describe_error
from lab.harness.workload import drop_schema, ensure_schema
from lab.provenance import run_meta
from lab.progress import ScenarioProgress
from lab.quiet import LibraryNoise
from lab.results import RunFolder
from lab.runner import records
from lab.runner.plan import Plan, RunRequest, make_plan, mark_unrunnable  # noqa: F401 (imported from here)
from lab.runner.resume import resumed
from lab.runner.lanes import LANE_WIND_DOWN_S, run_lanes, schedule  # noqa: F401 (imported from here)
from lab.runner.records import Started, TrialRecord, outcome_fields  # noqa: F401 (outcome_fields: imported from here)
from lab import waves as capacity_plan
from lab.servers import pg
from lab.servers.capacity import SessionSampler, read_capacity
from lab.servers.clients import redact
from lab.servers.services import (
    SERVICE_NAMES,
    Services,
    start_services,
)
from scenarios.base import OWN_SERVERS, Scenario, Skip, TrialEnv, TrialSpec


class Runner:
    """Runs one plan end to end; stops every server it started, whatever happens."""

    def __init__(self, request: RunRequest, console: Console | None = None):
        self.request = request  # on resume, replaced by the request the run was started with
        self.console = console or Console(stderr=True)
        self.stop = threading.Event()
        self.folder: RunFolder | None = None  # set once the run's folder exists
        self.waves: dict[str, capacity_plan.Wave] = {}  # scenario -> how many trials at once

    def execute(self) -> RunFolder:
        if self.request.resume:
            folder = RunFolder.open(self.request.results_root, self.request.resume)
            self.request, done = resumed(self.request, folder)
        else:
            folder, done = None, frozenset()
        req = self.request
        plan = make_plan(req, done)

        # Servers first: a bad address must fail before anything is written under results/.
        # An address the user gave is checked even when no chosen backend needs it.
        given = {name for name in SERVICE_NAMES if req.external.given(name)}
        services = start_services(plan.services | given, req.external)
        services.fault_commands = dict(req.fault_commands)
        if services.swept:
            self.console.print(f"removed the temp dirs of lab runs that were killed: {', '.join(services.swept)}")
        try:
            # Capacity before work: a server that cannot give one trial its sessions refuses the run here.
            capacity = read_capacity(services.pg_url)
            self.waves = {w.scenario: w for w in capacity_plan.fit(plan.demands(req.profile), capacity,
                                                                   redact(services.pg_url))}
            for wave in self.waves.values():
                if wave.limited:
                    self.console.print(capacity_plan.describe(wave, capacity))
            if folder is None:
                folder = RunFolder.create(req.results_root, run_meta(req, services))
            self._record_capacity(folder, capacity)
            self.folder = folder
            self.console.print(f"run [bold]{folder.run_id}[/] ({req.profile}): {plan.total} trials; "
                               f"servers: " + ", ".join(f"{n} {d['address']}" + (" (embedded)" if d["embedded"] else "")
                                                        for n, d in services.describe().items()))
            with LibraryNoise(folder.path / "libraries.log") as noise:
                try:
                    self._run_plan(plan, services, folder)
                finally:
                    if noise.summary():
                        self.console.print(noise.summary())
            return folder
        finally:
            self.stop.set()
            services.stop()

    def _record_capacity(self, folder: RunFolder, capacity) -> None:
        """meta.json keeps the server's limits and each scenario's plan (a resumed run adds its own)."""
        meta = folder.meta()
        meta.setdefault("capacity", []).append({"server": capacity.as_dict(),
                                                "waves": {n: w.as_dict() for n, w in self.waves.items()}})
        folder.write_meta(meta)

    def _record_peak(self, folder: RunFolder, scenario: str, peak: tuple[int, dict]) -> None:
        """What the scenario really used, beside what was planned: evidence that the plan held."""
        meta = folder.meta()
        wave = meta["capacity"][-1]["waves"][scenario]
        wave["peak_sessions_on_server"], wave["peak_by_application"] = peak
        folder.write_meta(meta)

    def _run_plan(self, plan: Plan, services: Services, folder: RunFolder) -> None:
        monitor, writes = pg.monitor_engine(services), pg.writes_engine(services)
        ensure_schema(monitor)
        backends.prepare_storage(monitor, self.request.backends)
        mark_unrunnable(plan, services, self.console)
        sampler = SessionSampler(services.pg_url)
        try:
            with Progress(TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), TextColumn("{task.fields[left]}"), console=self.console,
                          transient=False,
                          disable=not self.console.is_terminal) as progress:
                def run(scenario: Scenario) -> None:
                    self._run_one(plan, scenario, services, monitor, writes, folder, progress, sampler)

                for phase in schedule(plan.scenarios):
                    run_lanes(phase, run, self.stop)
        finally:
            sampler.close()
            if not self.stop.is_set():
                drop_schema(monitor)
            monitor.dispose()
            writes.dispose()

    def _run_one(self, plan: Plan, scenario: Scenario, services: Services, monitor, writes, folder: RunFolder,
                 progress: Progress, sampler: SessionSampler) -> None:
        specs = plan.pending[scenario.name]
        wave = self.waves.get(scenario.name)
        runnable = [spec for spec in specs if spec.skip is None]
        at_once = max(1, scenario.parallelism(self.request.profile))
        if wave is not None and wave.limited:
            at_once = max(1, -(-at_once // wave.waves))
        shown = ScenarioProgress(self.console, progress, scenario.name, len(specs),
                                 scenario.estimate_seconds(self.request.profile, len(runnable), at_once)
                                 if runnable else None, at_once)
        # The run's PostgreSQL sessions are sampled for the scenarios that use them; a scenario on servers
        # of its own runs beside one that does, and must not take that one's peak.
        samples = scenario.lane != OWN_SERVERS
        if samples:
            sampler.take_peak()
        self._run_scenario(scenario, specs, services, monitor, writes, folder, shown,
                           capacity_plan.SessionBudget(wave.budget if wave else 1),
                           lambda spec: plan.cost(scenario, spec, self.request.profile),
                           wave is not None and wave.limited)
        shown.finish()
        if samples and wave is not None and not self.stop.is_set():
            self._record_peak(folder, scenario.name, sampler.take_peak())
        window = scenario.wall_budget(self.request.profile)
        if window and wave is not None:
            wall = time.monotonic() - shown.started
            limited = f"; about {wave.waves} waves for the server's connections" if wave.limited else ""
            progress.console.print(f"{scenario.name}: {wall:.1f} s for a {window:.0f} s observation "
                                   f"window ({wall / window:.2f}x{limited})")

    def _run_scenario(self, scenario: Scenario, specs: list[TrialSpec], services: Services,
                      monitor, writes, folder: RunFolder, shown: ScenarioProgress,
                      budget: capacity_plan.SessionBudget,
                      cost, limited: bool) -> None:
        params = scenario.profile_params(self.request.profile)
        runnable = []
        for spec in specs:
            if spec.skip is not None:
                record = records.skipped(spec, spec.skip)
                folder.append(record)
                shown.advance(record)
            else:
                runnable.append(spec)
        workers = max(1, scenario.parallelism(self.request.profile))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=scenario.name)
        queue = capacity_plan.Dispatch([(spec, cost(spec)) for spec in runnable], budget, scarce_first=limited)
        try:
            in_flight: dict[Future, tuple[TrialSpec, int]] = {}
            while (queue and not self.stop.is_set()) or in_flight:
                # Start what fits: a trial whose sessions are not free yet waits without holding a worker,
                # and a later one that fits (a Redis lock's, which needs none) goes first.
                for spec, sessions in [] if self.stop.is_set() else queue.ready(workers - len(in_flight)):
                    env = TrialEnv(services, monitor, writes, folder.run_id, spec, params, self.stop, folder.path)
                    in_flight[pool.submit(self._run_trial, scenario, env)] = (spec, sessions)
                # A short timeout keeps the main thread responsive to Ctrl-C.
                finished, _ = wait(set(in_flight), timeout=0.2, return_when=FIRST_COMPLETED)
                for future in finished:
                    _, sessions = in_flight.pop(future)
                    budget.give(sessions)
                    record = future.result()
                    if record is not None and not self.stop.is_set():
                        folder.append(record)
                    shown.advance(record)
                shown.tick()
        except BaseException:
            # Wake every waiting trial now; what is in flight is not recorded.
            self.stop.set()
            raise
        finally:
            pool.shutdown(wait=not self.stop.is_set(), cancel_futures=True)

    def _run_trial(self, scenario: Scenario, env: TrialEnv) -> TrialRecord | None:
        if self.stop.is_set():
            return None
        started = Started()
        try:
            measures = scenario.run_trial(env)
            timing = started.timing()  # the trial's own time, without the checkers'
            return records.ok(env.spec, measures, outcome_fields(scenario, measures, backends.load(env.spec.backend)),
                              timing)
        except Skip as exc:
            return records.skipped(env.spec, exc.args[0] if exc.args else "")
        except Interrupted:
            return None
        except Exception as exc:  # one broken trial must not end the run; it is recorded as such
            if self.stop.is_set():
                return None
            reason, timing = describe_error(exc), started.timing()
            return records.error(env.spec, reason, traceback.format_exc(limit=6), timing)
