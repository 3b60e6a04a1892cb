"""The post's timing_sim: a long run holds the lock, short runs keep trying for it, on a cron grid or at random.

The long run takes the lock and then does nothing on the lock's connection, under
the post's guard (idle_in_transaction_session_timeout of one timeout); lease
backends get a TTL of the same length. Short runs try for the same lock on a
5 s cron grid (a random phase per trial) or as Poisson events about once a
second, over three timeouts. A trial records when the first short run got in.
Every trial only waits on timers, so many run at once, each on its own key.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy.engine import Engine

import backends
from backends.base import Backend
from lab.declarations.capabilities import Capability
from lab.checkers import ops
from lab.checkers.ops import F, Recorder, Type
from lab.checkers.verdict import Verdict
from lab.measures.kinds import Measured
from lab.declarations.pacing import Lane, Pacing
from lab.servers import sessions
from lab.servers.stores import SQL_STORES, idle_transaction_guard, store_engine
from lab.workload.table import COMPANY_SIZE, CompanyTable
from scenarios.base import Scenario, TrialEnv, judged

COMPANY = 1
# How often the long run asks for its fresh key before the trial is an error: aioredlock refused a free key once in
# a full run (its validity check, with the machine's two cores busy), which had made that trial an error.
FRESH_TRIES = 3
# In units of the timeout / 10, the post's proportions: 10 s timeout, 5 s cron, 1 s events, 30 s window.
CRON_PERIOD, EVENT_GAP, WINDOW = 5.0, 1.0, 30.0


def attempt_times(trigger: str, scale: float, rng: random.Random) -> list[float]:
    """When short runs start, in seconds after the long run took the lock."""
    times, window = [], WINDOW * scale
    if trigger == "cron":
        t = rng.uniform(0, CRON_PERIOD * scale)  # where the long run started on the cron grid
        while t < window:
            times.append(t)
            t += CRON_PERIOD * scale
    else:
        t = rng.expovariate(1 / (EVENT_GAP * scale))
        while t < window:
            times.append(t)
            t += rng.expovariate(1 / (EVENT_GAP * scale))
    return times


class Timing(Scenario):
    name = "timing"
    measured = Measured.GUARD_TIMING
    default_run = True
    pacing = Pacing(lane=Lane.ALONE)  # when a short run got in, against guard timers: nothing beside it
    summary = "the post's timing runs: lock held under a timeout, short runs on a 5 s cron grid or ~1/s events"
    variants = ("cron", "event")
    params = {
        "quick": {"timeout_s": 1.0, "trials": 5, "parallel": 60},
        # 180 at once, not 240: with 240, lease renewals starved on this 2-core machine (etcd leases lost at
        # release, gRPC timeouts) whenever the mix leaned towards lease trials, a verdict about the client.
        # 120 kept the machine 36% busy; 180 about 55%, with every cell's outcome as at 120 (173.7 s -> 124.0 s).
        "default": {"timeout_s": 10.0, "trials": 20, "parallel": 180},
    }

    def applies_to(self, backend_cls) -> str | None:
        """Any lock a long run can hold while idle: across writes (a session lock, a lease) or inside one."""
        if not (backend_cls.holds_across_writes() or Capability.IN_TRANSACTION in backend_cls.capabilities):
            return "no lock for a long run to hold: the timing runs need a session lock, a lease or a lock in the write"
        return None

    def pg_sessions(self, backend_cls, profile: str) -> int:
        """The long run's lock session, and the session of the one short run trying at a time (a trial's
        short runs follow each other); a lock held elsewhere needs none here.

        Counting the short run's session as shared by all trials (they connect for a moment, about once a
        second) was tried against a server with max_connections 100: under a loaded 2-core client a
        connection lived long enough that 19 overlapped, and trials were refused slots."""
        return 2 if backend_cls.lock_service == "postgres" else 0

    def wall_budget(self, profile: str) -> float:
        """The observation window: the whole scenario should take about this long, not trials x window."""
        return WINDOW * self.profile_params(profile)["timeout_s"] / 10

    def run_trial(self, env: TrialEnv) -> dict:
        timeout = env.params["timeout_s"]
        scale = timeout / 10
        seed = f"{env.run_id}:{env.spec.id}"
        times = attempt_times(env.spec.variant, scale, random.Random(seed))
        cls = backends.load(env.spec.backend)
        # The post's guard on the server the long run idles on: its lock's session, or its write's for a lock in it.
        holder = LongRun(env, timeout, idle_transaction_guard(
            cls.writes_to if Capability.IN_TRANSACTION in cls.capabilities else
            cls.lock_service if cls.lock_service in SQL_STORES else "postgres", timeout))
        history = Recorder()
        try:
            t0 = holder.start(history)
            first, tried = None, 0
            for t in times:
                env.wait_until(t0, t)
                tried += 1
                if self._short_run_gets_in(env, holder, timeout, history, f"short-{tried}"):
                    first = time.monotonic() - t0
                    break
            state = holder.state()
            if holder.in_transaction and state == "gone":
                # The guard ended the long run's transaction, and its write with it: seen now, at the latest.
                history.add("long", Type.FAIL, F.WRITE, company=COMPANY, error="its session is gone")
            return {"trigger": env.spec.variant, "timeout_s": timeout, "window_s": WINDOW * scale,
                    "seed": seed, "attempts": tried, "first_got_at": None if first is None else round(first, 3),
                    "holder_state_at_end": state, "history": ops.to_json(history.ops())}
        finally:
            holder.stop()

    @staticmethod
    def _short_run_gets_in(env: TrialEnv, holder: "LongRun", timeout: float, history: Recorder,
                           process: str) -> bool:
        """One short run tries once, recorded as its own process: True if it got in."""
        if holder.in_transaction:
            # A short run of method 4 tries the company's lock without waiting (lock_timeout 1 ms).
            short = env.backend(table=holder.table, options={"lock_timeout_ms": 1})
            history.add(process, Type.INVOKE, F.WRITE, company=COMPANY)
            result = short.rebuild(COMPANY, COMPANY_SIZE, "short")
            if result.outcome != "committed":
                history.add(process, Type.FAIL, F.WRITE, company=COMPANY, error=result.error)
                return False
            history.add(process, Type.OK, F.ACQUIRE, scope="company", company=COMPANY)  # it had the lock to commit
            history.add(process, Type.INVOKE, F.COMMIT, company=COMPANY)
            history.add(process, Type.OK, F.WRITE, company=COMPANY)
            return True
        history.add(process, Type.INVOKE, F.ACQUIRE)
        got = env.contender_gets_in(options={"ttl_s": timeout})
        history.granted(process, got)
        return got

    def judge(self, measures: dict, backend_cls) -> Verdict:
        """The checkers: a short run in while the long run still believed it held is a lost lock (these trials
        write nothing, so no more); one that got the company's lock after the guard ended the long run's
        transaction took it from a write that rolled back."""
        return judged(measures, backend_cls)


class LongRun:
    """The long run: holds its backend's lock and stays idle on the lock's connection."""

    def __init__(self, env: TrialEnv, timeout: float, guard: dict):
        self.env, self.timeout, self.guard = env, timeout, guard
        self.in_transaction = Capability.IN_TRANSACTION in backends.load(env.spec.backend).capabilities
        self.table: CompanyTable | None = None
        self._done = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._backend: Backend | None = None
        self._engine: Engine | None = None
        self._pid: int | None = None

    def start(self, history: Recorder) -> float:
        """Take the lock, recorded in the history as process "long"; returns the monotonic time it was taken."""
        if not self.in_transaction:
            self._backend = backend = self.env.backend(lock_settings=self.guard, options={"ttl_s": self.timeout})
            for _ in range(FRESH_TRIES):  # a fresh key is free: a refusal is the library's, on a busy machine
                history.add("long", Type.INVOKE, F.ACQUIRE)
                if backend.acquire():
                    history.add("long", Type.OK, F.ACQUIRE, scope="run", token=backend.token)
                    return time.monotonic()
                history.add("long", Type.FAIL, F.ACQUIRE)
            raise RuntimeError(f"the long run could not take a fresh lock in {FRESH_TRIES} tries")
        history.add("long", Type.INVOKE, F.WRITE, company=COMPANY)
        # Method 4 holds its lock inside an open write transaction: idle in it, under the same guard.
        self.table = table = self.env.table()
        table.seed(self.env.writes, COMPANY, COMPANY_SIZE)
        self._engine = engine = store_engine(self.env.services, backends.load(self.env.spec.backend).writes_to,
                                             self.guard, pool_size=1)
        taken = threading.Event()

        def hold(name, conn):
            if name == "after_lock":
                self._pid = sessions.session_id(conn)
                taken.set()
                self._done.wait()

        self._backend = backend = self.env.backend(table=table, writes=engine)
        self._pool = ThreadPoolExecutor(1)
        self._pool.submit(backend.rebuild, COMPANY, COMPANY_SIZE, "long", hold)
        if not taken.wait(30):
            raise RuntimeError("the long run never took its company's lock")
        history.add("long", Type.OK, F.ACQUIRE, scope="company", company=COMPANY)
        return time.monotonic()

    def state(self) -> str | None:
        pid = self._pid if self.in_transaction or self._backend is None else self._backend.lock_pid
        return sessions.state(self.env.monitor, pid) if pid else None

    def stop(self) -> None:
        self._done.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self._backend is not None:
            self._backend.close()
        if self._engine is not None:
            self._engine.dispose()
