"""Hypothesis searches fault schedules for a backend and shrinks any that breaks it.

A schedule names a point in run r0's job (after its acquire, after a delete, mid-insert
at row k, before or after a commit, before its release), a fault that fires there
(terminate its session, kill the run, pause it, cut its lock connection) for some
TTLs, and how many runs (2-4) rebuild how many companies (1-5). The other runs start
once the fault has fired. The checkers then read the history and the final table;
any violation fails the example, and hypothesis shrinks it to the smallest schedule
that still fails. Runs are threads of this process, so the history has one clock.
"""

from __future__ import annotations

import itertools
import threading
import time

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Flaky

import backends
from lab import pg
from lab.checkers import check_history
from lab.clients import pg_engine
from lab.history import History
from lab.job import run_job
from lab.proxy import BlackholeProxy
from lab.workload import COMPANY_SIZE, Observer
from scenarios._lease_faults import lock_addresses, lock_has_own_connection, lock_service, proxied_spec
from scenarios.base import Scenario, TrialEnv

POINTS = ("after_acquire", "after_delete", "mid_insert", "before_commit", "after_commit", "before_release")
KINDS = ("terminate", "kill", "pause", "cut")
DURATIONS = (0.5, 1.5, 2.5)  # in TTLs: shorter than the lease, then longer


class RunKilled(Exception):
    """Raised inside run r0 at its kill point: the run stops there, as a killed process would."""


def schedules():
    return st.fixed_dictionaries({
        "point": st.sampled_from(POINTS), "kind": st.sampled_from(KINDS),
        "duration": st.sampled_from(DURATIONS), "runs": st.integers(2, 4), "companies": st.integers(1, 5),
        "split_at": st.integers(1, COMPANY_SIZE - 1)})


def describe(schedule: dict) -> str:
    """A schedule in words, for the report."""
    where = f"mid-insert at row {schedule['split_at']}" if schedule["point"] == "mid_insert" else \
        schedule["point"].replace("_", " ")
    what = {"terminate": "its session terminated", "kill": "the run killed",
            "pause": f"the run paused for {schedule['duration']:g} TTL",
            "cut": f"its lock connection cut for {schedule['duration']:g} TTL"}[schedule["kind"]]
    companies = f"{schedule['companies']} compan{'y' if schedule['companies'] == 1 else 'ies'}"
    return (f"{schedule['runs']} runs, {companies} each; run r0 {where}: {what}; "
            f"the other runs start then")


_example_ids = itertools.count()


def run_example(env: TrialEnv, schedule: dict, ttl: float) -> dict:
    """One schedule, for real: returns its history, the final table and the violations found."""
    cls = backends.load(env.spec.backend)
    table = env.table(f"kp{next(_example_ids)}")
    if schedule["point"] == "mid_insert":
        table.split_insert_at = schedule["split_at"]
    companies = list(range(1, schedule["companies"] + 1))
    table.fill(env.writes, companies, COMPANY_SIZE)
    history, key = History(), env.key(f"kp{next(_example_ids)}")
    own = lock_has_own_connection(cls)
    proxies, victim_writes, options = [], None, {"ttl_s": ttl}
    if schedule["kind"] == "cut":
        service = lock_service(cls)
        proxies = [BlackholeProxy(*a).start() for a in lock_addresses(env, service)]
        change = proxied_spec(env, service, [p.port for p in proxies], own)
        options.update(change.get("options", {}))
        if "writes_dsn" in change:
            victim_writes = pg_engine(change["writes_dsn"], pool_size=2, pool_pre_ping=True)
    victim = env.backend(table=table, options=options, key=key, writes=victim_writes)
    others = [env.backend(table=table, options={"ttl_s": ttl}, key=key) for _ in range(schedule["runs"] - 1)]
    fired = threading.Event()

    def fault(name, conn):
        if outcome.get("r0") == "killed":
            raise RunKilled()  # a killed run does nothing more, whatever its driver said about the rollback
        if name != schedule["point"] or fired.is_set():
            return
        kind, hold = schedule["kind"], schedule["duration"] * ttl
        target = pg.backend_pid(conn) if conn is not None else victim.lock_pid
        if kind in ("terminate", "kill") and target is not None:
            pg.terminate(env.monitor, target)
        if kind == "pause":
            victim.suspend(hold)
        for proxy in proxies:
            proxy.blackhole()
        history.add("injector", "fault_fired", kind=kind, point=name, target=target)
        fired.set()
        if kind == "kill":
            outcome["r0"] = "killed"
            victim.abandon()
            raise RunKilled()
        env.pause(hold)
        for proxy in proxies:
            proxy.restore()
        history.add("injector", "fault_healed", kind=kind)

    outcome: dict = {}
    observers = [Observer(env.monitor, table, c, on_change=lambda c, n: history.add("observer", "observed",
                                                                                   company=c, count=n))
                 for c in companies]
    def victim_run():
        try:
            run_job(victim, companies, COMPANY_SIZE, "r0", fault, history=history)
        except RunKilled:
            outcome["r0"] = "killed"
        finally:
            fired.set()  # a run that never reached the point lets the others go

    try:
        for observer in observers:
            observer.__enter__()
        thread = threading.Thread(target=victim_run, name="killpoint-r0", daemon=True)
        thread.start()
        fired.wait(30)
        patience = max(DURATIONS) * ttl + 1.0 if schedule["kind"] in ("pause", "cut") else 0.0
        for i, other in enumerate(others, start=1):
            run_job(other, companies, COMPANY_SIZE, f"r{i}", history=history, patience=patience)
        thread.join(30 + 3 * ttl)
    finally:
        for observer in observers:
            observer.__exit__(None, None, None)
        for backend in [victim, *others]:
            backend.close()
        for proxy in proxies:
            proxy.stop()
        if victim_writes is not None:
            victim_writes.dispose()
    with env.writes.connect() as conn:
        final = {c: {"rows": table.count(conn, c), "runs": table.runs_in(conn, c)} for c in companies}
    events = history.to_list()
    violations = check_history(events, final, COMPANY_SIZE, "exclusion" in cls.capabilities)
    return {"schedule": schedule, "events": events, "final": {str(c): v for c, v in final.items()},
            "violations": violations}


class Killpoints(Scenario):
    name = "killpoints"
    summary = "hypothesis searches kill points x faults x runs x companies; shrinks any schedule that breaks a backend"
    variants = ("search",)
    params = {
        "quick": {"examples": 6, "shrink_s": 15.0, "ttl_s": 0.5, "trials": 1, "parallel": 1},
        "default": {"examples": 50, "shrink_s": 30.0, "ttl_s": 1.0, "trials": 1, "parallel": 1},
    }

    def run_trial(self, env: TrialEnv) -> dict:
        p, started = env.params, time.monotonic()
        tried, failures, best = [0], [0], {}

        # No @seed: with one, hypothesis stops saving to the database, and the database is what
        # replays a failure first on the next run.
        @settings(max_examples=p["examples"], deadline=None, print_blob=False,
                  database=self._database(env), suppress_health_check=list(HealthCheck),
                  phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink), report_multiple_bugs=False)
        @given(schedules())
        def search(schedule):
            shrinking_over = best and time.monotonic() > best["found_at"] + p["shrink_s"]
            if shrinking_over and schedule != best["schedule"]:
                return  # the shrink budget is spent: keep the smallest failure found so far
            tried[0] += 1
            result = run_example(env, schedule, p["ttl_s"])
            if result["violations"]:
                failures[0] += 1
                best.update(result, found_at=best.get("found_at", time.monotonic()))
                raise AssertionError("; ".join(v["kind"] for v in result["violations"]))

        flaky = False
        try:
            search()
        except AssertionError:
            pass
        except Flaky:
            flaky = True  # a schedule failed once and passed on its replay: timing decided, report it so
        return {"examples": p["examples"], "tried": tried[0], "failing_seen": failures[0], "ttl_s": p["ttl_s"],
                "flaky": flaky,
                "seconds": round(time.monotonic() - started, 1),
                "minimal": None if not best else {k: best[k] for k in ("schedule", "violations", "events", "final")},
                "described": describe(best["schedule"]) if best else None}

    @staticmethod
    def _database(env: TrialEnv):
        """Hypothesis' examples live with the run, so a failure replays the same way next time."""
        if env.results_dir is None:
            return None
        return DirectoryBasedExampleDatabase(str(env.results_dir / "hypothesis" / env.spec.backend))

    def verdict(self, measures: dict) -> str:
        if measures["minimal"] is None:
            return f"{measures['tried']} schedules tried, none failed"
        kinds = sorted({v["kind"] for v in measures["minimal"]["violations"]})
        return ("counterexample (did not fail on every replay): " if measures.get("flaky") else
                "counterexample: ") + ", ".join(kinds)
