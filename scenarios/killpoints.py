"""Hypothesis searches fault schedules for a backend and shrinks any that breaks it.

A schedule names a point in run r0's job (after its acquire, after a delete, mid-insert
at row k, before or after a commit, before its release), a fault that strikes there
(terminate its session, kill the run, stall it, cut its lock connection) for some
TTLs, and how many runs (2-4) rebuild how many companies (1-5). The other runs start
together: once r0 holds its run-level right, and keep asking for it every 20 ms as waiting
contenders would, so whoever can get in after the fault gets in at once; where there is no
run-level right (a lock inside the write, or none), once the fault has struck. The checkers then read the history and
the final table; any violation fails the example, and hypothesis shrinks it to the smallest
schedule that still fails. Runs are threads of this process, so the history has one clock.

A schedule whose fault has no target (a terminate where the run holds no session, a cut
that carried nothing) is not counted: it proves nothing about the lock. The verdict says
how many schedules struck.
"""

from __future__ import annotations

import itertools
import threading
import time

from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Flaky

import backends
from lab import faults
from lab.declarations.capabilities import Capability
from lab.checkers import ops
from lab.checkers.judge import judge, search_verdict
from lab.checkers.ops import F, Recorder, Type
from lab.checkers.outcomes import Safety
from lab.checkers.verdict import SAFETY_OF, Valid, Verdict
from lab.declarations.columns import Column, FaultFamily
from lab.faults import FaultNotConfirmed, Target
from lab.measures.kinds import Measured
from lab.servers import sessions
from lab.servers.stores import SQL_STORES, writes_engine
from lab.workload.job import run_job
from lab.workload.table import COMPANY_SIZE, Observer
from scenarios.base import Scenario, TrialEnv

POINTS = ("after_acquire", "after_delete", "mid_insert", "before_commit", "after_commit", "before_release")
# Points where run r0 is inside a write transaction, so a write session exists to strike.
IN_WRITE = frozenset({"after_delete", "mid_insert", "before_commit"})
# terminate: pg_terminate_backend on the session at hand; kill: the run stops for good, dropping its
# connections unreleased; stall: the run's thread and its keep-alive stop for a while (an in-process
# pause: the pause scenario's SIGSTOP needs a process of its own); cut: the cut fault's proxy.
KINDS = ("terminate", "kill", "stall", "cut")
DURATIONS = (0.5, 1.5, 2.5)  # in TTLs: shorter than the lease, then longer
POLL_S = 0.02  # how often a waiting run asks for the right again


MAX_RUNS = 4  # runs in one schedule, at most


class RunKilled(Exception):
    """Raised inside run r0 at its kill point: the run stops there, as a killed process would."""


def schedules():
    return st.fixed_dictionaries({
        "point": st.sampled_from(POINTS), "kind": st.sampled_from(KINDS),
        "duration": st.sampled_from(DURATIONS), "runs": st.integers(2, MAX_RUNS), "companies": st.integers(1, 5),
        "split_at": st.integers(1, COMPANY_SIZE - 1)})


# Schedules every search tries first, before hypothesis generates its own: the faults the post and
# the lease scenarios show breaking a lock, so a sample of 50 cannot miss them by chance. Five
# companies after a terminate: a waiting contender polls every 20 ms, so r0 must still be writing.
CANONICAL = [
    {"point": "after_acquire", "kind": "terminate", "duration": 0.5, "runs": 2, "companies": 5, "split_at": 1},
    {"point": "after_acquire", "kind": "stall", "duration": 2.5, "runs": 2, "companies": 1, "split_at": 1},
    {"point": "after_acquire", "kind": "cut", "duration": 2.5, "runs": 2, "companies": 1, "split_at": 1},
    {"point": "after_delete", "kind": "kill", "duration": 0.5, "runs": 2, "companies": 1, "split_at": 1},
    {"point": "after_delete", "kind": "stall", "duration": 2.5, "runs": 2, "companies": 1, "split_at": 1},
]


def has_target(schedule: dict, backend_cls) -> bool:
    """Whether the schedule's fault has anything of this backend's to strike at its point (by declaration)."""
    if schedule["point"] in IN_WRITE or backend_cls.holds_across_writes():
        if schedule["kind"] == "terminate" and schedule["point"] not in IN_WRITE:
            return backend_cls.lock_service in SQL_STORES  # only a SQL lock session can be terminated
        return True
    return False


def describe(schedule: dict) -> str:
    """A schedule in words, for the report."""
    where = f"mid-insert at row {schedule['split_at']}" if schedule["point"] == "mid_insert" else \
        schedule["point"].replace("_", " ")
    what = {"terminate": "its session terminated", "kill": "the run killed",
            "stall": f"the run stalled for {schedule['duration']:g} TTL",
            "pause": f"the run paused for {schedule['duration']:g} TTL",  # the name in runs before 'stall'
            "cut": f"its lock connection cut for {schedule['duration']:g} TTL"}[schedule["kind"]]
    companies = f"{schedule['companies']} compan{'y' if schedule['companies'] == 1 else 'ies'}"
    return (f"{schedule['runs']} runs, {companies} each; run r0 {where}: {what}; "
            f"the other runs contend concurrently")


_example_ids = itertools.count()


def run_example(env: TrialEnv, schedule: dict, ttl: float) -> dict:
    """One schedule, for real: returns its history, the final table, the violations and whether it struck."""
    example = Example(env, schedule, ttl)
    try:
        example.contest()
    finally:
        example.close()
    return example.judged()


class Example:
    """One kill-point schedule while it runs, in its phases: its parts made (the table, run r0 and the others),
    the contest (r0's job with the fault at its point, the others contending), the fault's strike and heal,
    then the judgement of the history and the final table."""

    def __init__(self, env: TrialEnv, schedule: dict, ttl: float):
        self.env, self.schedule, self.ttl = env, schedule, ttl
        self.cls = cls = backends.load(env.spec.backend)
        self.table = table = env.table(f"kp{next(_example_ids)}")
        if schedule["point"] == "mid_insert":
            table.split_insert_at = schedule["split_at"]
        self.companies = list(range(1, schedule["companies"] + 1))
        table.fill(env.writes, self.companies, COMPANY_SIZE)
        self.history, key = Recorder(), env.key(f"kp{next(_example_ids)}")
        self.cut = faults.load("cut") if schedule["kind"] == "cut" else None
        route = self.cut.route(env.services, cls) if self.cut is not None else faults.Route()
        self.victim_writes = writes_engine(env.services, cls.writes_to, {}, route.writes_url, pool_size=2,
                                           pool_pre_ping=True) if route.writes_url else None
        self.victim = env.backend(table=table, options={"ttl_s": ttl}, key=key, writes=self.victim_writes,
                                  routed=route.lock_services)
        self.others = [env.backend(table=table, options={"ttl_s": ttl}, key=key) for _ in range(schedule["runs"] - 1)]
        self.fired, self.contending = threading.Event(), threading.Event()
        self.struck: dict = {}
        self.outcome: dict = {}

    def strike(self, name, conn) -> dict:
        """The fault, at its point; evidence that it struck, or FaultNotConfirmed."""
        env, cls, victim, cut = self.env, self.cls, self.victim, self.cut
        kind, pid = self.schedule["kind"], sessions.session_id(conn) if conn is not None else victim.lock_pid
        if kind == "terminate":
            return faults.terminate_confirmed(env.monitor, pid)
        if not (conn is not None or cls.holds_across_writes()):
            raise FaultNotConfirmed(f"run r0 holds nothing at {name} for a {kind} to take away")
        if kind == "kill":
            if conn is not None:
                faults.terminate_confirmed(env.monitor, pid)
            victim.abandon()
            return {"fault": "kill", "pid": pid}
        if kind == "stall":
            victim.suspend(self.schedule["duration"] * self.ttl)
            return {"fault": "stall", "seconds": self.schedule["duration"] * self.ttl}
        if cut is None:  # the one kind left is the cut, made above for it
            raise ValueError(f"a kill-point schedule of kind {kind!r} has no fault")
        target = Target(env.services, env.monitor, cls, lock_pid=victim.lock_pid,
                        write_pid=sessions.session_id(conn) if conn is not None else None)
        cut.inject(target)
        try:
            return cut.confirm(target)
        except FaultNotConfirmed:
            cut.heal(target)
            raise

    def at_point(self, name, conn) -> None:
        """Run r0's hook at each of its job's points: the others start contending, and the fault strikes at the
        schedule's point (once), lasts its duration and heals."""
        if name == "after_acquire" and self.cls.holds_across_writes():
            self.contending.set()  # r0 holds the run-level right: the other runs start polling for it now
        if self.outcome.get("r0") == "killed":
            raise RunKilled()  # a killed run does nothing more, whatever its driver said about the rollback
        if name != self.schedule["point"] or self.fired.is_set():
            return
        try:
            self.struck.update(self.strike(name, conn), struck=True)
        except FaultNotConfirmed as exc:
            self.struck.update(struck=False, why=str(exc))
        self.history.add("injector", Type.OK, F.FAULT, kind=self.schedule["kind"], point=name,
                         struck=self.struck["struck"])
        self.fired.set()
        self.contending.set()  # no run-level right to wait for: the other runs start once the fault has struck
        if self.schedule["kind"] == "kill":
            self.outcome["r0"] = "killed"
            raise RunKilled()
        if self.schedule["kind"] in ("stall", "cut") and self.struck["struck"]:
            self.heal_after(self.schedule["duration"] * self.ttl)

    def heal_after(self, seconds: float) -> None:
        """The fault lasts its duration, then heals: even when a stop cuts the pause short, since a dark proxy
        would hold r0's rollback, and the trial's close() waiting on the same connection, for ever."""
        try:
            self.env.pause(seconds)
        finally:
            if self.cut is not None:
                self.struck.update(self.cut.heal(Target(self.env.services, self.env.monitor, self.cls)))
        self.history.add("injector", Type.OK, F.HEAL, kind=self.schedule["kind"])

    def victim_run(self) -> None:
        try:
            run_job(self.victim, self.companies, COMPANY_SIZE, "r0", self.at_point, history=self.history)
        except RunKilled:
            self.outcome["r0"] = "killed"
        finally:
            self.fired.set()  # a run that never reached the point lets the others go
            self.contending.set()

    def contest(self) -> None:
        """r0's job, then the others all at once once r0 holds the right (or the fault struck), each polling for
        the right as long as the longest fault lasts, so whoever gets in after a loss gets in at once, as a
        contender already waiting would; observers record every company's row count as it changes."""
        history = self.history
        observers = [Observer(self.env.monitor, self.table, c, on_change=history.observed) for c in self.companies]
        patience = max(DURATIONS) * self.ttl + 1.0
        try:
            for observer in observers:
                observer.__enter__()
            thread = threading.Thread(target=self.victim_run, name="killpoint-r0", daemon=True)
            thread.start()
            self.contending.wait(30)
            threads = [threading.Thread(target=run_job, args=(other, self.companies, COMPANY_SIZE, f"r{i}"),
                                        kwargs={"history": history, "patience": patience, "retry_every": POLL_S},
                                        name=f"killpoint-r{i}", daemon=True)
                       for i, other in enumerate(self.others, start=1)]
            for t in threads:
                t.start()
            for t in [*threads, thread]:
                t.join(30 + 3 * self.ttl)
        finally:
            for observer in observers:
                observer.__exit__(None, None, None)

    def close(self) -> None:
        for backend in [self.victim, *self.others]:
            backend.close()
        if self.cut is not None:
            self.cut.close()
        if self.victim_writes is not None:
            self.victim_writes.dispose()

    def judged(self) -> dict:
        """The example's record: its history and final table judged by the one set of checkers. It fails when
        the company paid: an unknown commit or a lock lost with no write after it does not."""
        with self.env.writes.connect() as conn:
            final = {c: {"rows": self.table.count(conn, c), "runs": self.table.runs_in(conn, c)}
                     for c in self.companies}
        history = self.history.ops()
        cls = self.cls
        verdict = judge(history, final, COMPANY_SIZE, Capability.EXCLUSION in cls.capabilities,
                        lease_ttl=self.ttl if Capability.LEASE_EXPIRY in cls.capabilities else None)
        violations = [{"kind": f.kind.value, "detail": f.detail} for f in verdict.findings
                      if f.valid is Valid.FALSE and f.kind is not None and SAFETY_OF[f.kind] is Safety.UNSAFE]
        return {"schedule": self.schedule, "history": history, "final": {str(c): v for c, v in final.items()},
                "violations": violations, "verdict": verdict.to_json(), "struck": bool(self.struck.get("struck")),
                "evidence": self.struck}


class Killpoints(Scenario):
    name = "killpoints"
    measured = Measured.KILL_POINT_SEARCH
    summary = "hypothesis searches kill points x faults x runs x companies; shrinks any schedule that breaks a backend"
    title = "kill points searched by hypothesis"
    columns = (
        Column("search", "kill points searched by hypothesis", 25,
               "hypothesis searches schedules of kills and cuts at the write's named points for one that breaks "
               "the company; each kill confirmed as the lock session's is",
               family=FaultFamily.KILL_POINTS, happens_when=()),
    )
    params = {
        "quick": {"examples": 15, "shrink_s": 15.0, "ttl_s": 0.5, "trials": 1, "parallel": 2},
        # Twelve searches at once (hypothesis is thread-safe from 6.136), each with its backend's own key,
        # table and example database. They wait on TTLs most of the time: with four at once the machine was
        # 20-40% busy while they ran (run 193d), with eight 50-70% (run 1361); a search that finds nothing
        # takes 30-80 s and the reference's 26 backends have 11 such, so twelve start them all at once.
        "default": {"examples": 50, "shrink_s": 30.0, "ttl_s": 1.0, "trials": 1, "parallel": 12},
    }

    def trial_seconds(self, profile: str) -> float:
        """A search: its examples, each a few TTLs of runs and faults, then the shrinking budget."""
        p = self.profile_params(profile)
        return p["examples"] * (2 * p["ttl_s"] + 0.3) + p["shrink_s"]

    def pg_sessions(self, backend_cls, profile: str) -> int:
        """Up to MAX_RUNS runs, each with a lock session and a write session, and the observer."""
        return 2 * MAX_RUNS + 1

    def run_trial(self, env: TrialEnv) -> dict:
        p, started = env.params, time.monotonic()
        tried, failures = [0], [0]
        best: dict = {}
        count = {"struck": 0, "not_struck": 0}
        cls = backends.load(env.spec.backend)

        # No @seed: with one, hypothesis stops saving to the database, and the database is what
        # replays a failure first on the next run.
        def search(schedule):
            shrinking_over = best and time.monotonic() > best["found_at"] + p["shrink_s"]
            if shrinking_over and schedule != best["schedule"]:
                return  # the shrink budget is spent: keep the smallest failure found so far
            assume(has_target(schedule, cls))  # nothing to strike there: not a schedule worth counting
            tried[0] += 1
            result = run_example(env, schedule, p["ttl_s"])
            count["struck" if result["struck"] else "not_struck"] += 1
            if result["violations"]:
                failures[0] += 1
                best.update(result, found_at=best.get("found_at", time.monotonic()))
                raise AssertionError("; ".join(v["kind"] for v in result["violations"]))
            assume(result["struck"])  # a fault that struck nothing is not counted as a schedule tried

        searched = given(schedules())(search)
        for schedule in reversed(CANONICAL):  # tried first, in this order (no shrinking: they are small)
            searched = example(schedule)(searched)
        # No seed: with one, hypothesis stops saving to the database, and the database is what
        # replays a failure first on the next run.
        searched = settings(max_examples=p["examples"], deadline=None, print_blob=False,
                            database=self._database(env), suppress_health_check=list(HealthCheck),
                            phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
                            report_multiple_bugs=False)(searched)
        flaky = False
        try:
            searched()
        except AssertionError:
            pass
        except Flaky:
            flaky = True  # a schedule failed once and passed on its replay: timing decided, report it so
        return {"examples": p["examples"], "tried": tried[0], "failing_seen": failures[0], "ttl_s": p["ttl_s"],
                "flaky": flaky, **count,
                "seconds": round(time.monotonic() - started, 1),
                "minimal": None if not best else {k: best[k] for k in ("schedule", "violations", "final", "verdict")},
                "described": describe(best["schedule"]) if best else None,
                "history": ops.to_json(best["history"]) if best else []}

    @staticmethod
    def _database(env: TrialEnv):
        """Hypothesis' examples live with the run, so a failure replays the same way next time."""
        if env.results_dir is None:
            return None
        return DirectoryBasedExampleDatabase(str(env.results_dir / "hypothesis" / env.spec.backend))

    def judge(self, measures: dict, backend_cls) -> Verdict:
        """The search's verdict: its smallest counterexample's, as the checkers judged that history, or the
        count of schedules that struck and passed. The trial's history is that counterexample's."""
        minimal = measures["minimal"]
        found = Verdict.from_json(minimal["verdict"]) if minimal else None
        return search_verdict(found, measures["struck"], measures.get("flaky", False))
