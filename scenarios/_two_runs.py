"""Two runs of the job on one company, the second started while the first is inside its write."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from lab.checkers import ops
from lab.checkers.ops import F, Op, Recorder, Type
from lab.errors import LabError
from lab.servers import sessions
from lab.workload.job import JobResult, run_job
from lab.workload.table import COMPANY_SIZE, Observer
from scenarios.base import TrialEnv

COMPANY = 1
MEET_WITHIN_S = 10.0  # how much longer run1 waits for run2 to reach it after its hold, on a slow machine
MEET_POLL_S = 0.02


@dataclass
class Sync:
    """Signals between run1's hook and the trial: when run2 may start, and when it has finished."""

    started: threading.Event
    second_done: threading.Event
    history: Recorder

    def hold_until_met(self, env: TrialEnv, conn, at_least: float) -> None:
        """Keep run1 where it is for at_least seconds, then until run2 has met it: refused by the lock, blocked
        behind run1's session, or finished. On a loaded machine run2 can start after run1's hold is over, and
        two runs that never overlapped would read as a different verdict (intact instead of held) for
        nothing the lock did. At most MEET_WITHIN_S more; past that the trial goes on as it is."""
        env.pause(at_least)
        pid = sessions.session_id(conn) if conn is not None else None
        deadline = time.monotonic() + MEET_WITHIN_S
        while not self._met(env, pid) and time.monotonic() < deadline:
            env.pause(MEET_POLL_S)  # neither the lock nor pg_stat_activity announces a waiter: ask again

    def _met(self, env: TrialEnv, pid: int | None) -> bool:
        refused = any(op.process == "run2" and op.f is F.ACQUIRE and op.type is Type.FAIL for op in self.history.ops())
        return self.second_done.is_set() or refused or (pid is not None and sessions.blocks_another(env.monitor, pid))


@dataclass
class TwoRuns:
    """What a two-run trial produced: both jobs, what the observer saw, and the company at the end."""

    first: JobResult
    second: JobResult
    rows_seen: list[int]
    rows_final: int
    runs_in: list[str]
    t0: float
    history: list[Op]

    def measures(self) -> dict:
        """The runs' summaries and the company's counts."""
        return {"rows": COMPANY_SIZE, "runs": [self.first.summary(self.t0), self.second.summary(self.t0)],
                "rows_seen": self.rows_seen, "rows_final": self.rows_final, "runs_in_final": self.runs_in}

    def judged_measures(self) -> dict:
        """measures() with the trial's history and final table, for a scenario the checkers judge."""
        return {**self.measures(), "history": ops.to_json(self.history),
                "final": {str(COMPANY): {"rows": self.rows_final, "runs": self.runs_in}}}


def two_runs(env: TrialEnv, first_point, second_point=None, options: dict | None = None,
             companies: tuple[list[int], list[int]] = ([COMPANY], [COMPANY]), batch: bool = False,
             started_within: float = 10.0) -> TwoRuns:
    """Seed a company, start run1, and start run2 when run1's hook says so.

    first_point(name, conn, sync) is run1's hook: it sets sync.started at the moment run2
    should begin (e.g. right after run1's delete), then may keep run1 waiting there.
    """
    table = env.table()
    for company in sorted(set(companies[0]) | set(companies[1])):
        table.seed(env.writes, company, COMPANY_SIZE)
    first, second = (env.backend(table=table, options=options) for _ in range(2))
    t0 = time.monotonic()
    history = Recorder(t0)
    sync = Sync(threading.Event(), threading.Event(), history)
    seen = Observer(env.monitor, table, COMPANY, on_change=history.observed)
    try:
        with seen as observer, ThreadPoolExecutor(2) as pool:
            run1 = pool.submit(run_job, first, companies[0], COMPANY_SIZE, "run1",
                               lambda name, conn: first_point(name, conn, sync), batch, history=history)
            if not sync.started.wait(started_within) and not run1.done():
                raise LabError("run1 never reached the point where run2 should start")
            run2 = pool.submit(run_job, second, companies[1], COMPANY_SIZE, "run2",
                               second_point or (lambda name, conn: None), batch, history=history)
            run2.add_done_callback(lambda _: sync.second_done.set())
            job1, job2 = run1.result(), run2.result()
        with env.writes.connect() as conn:
            rows_final, runs_in = table.count(conn, COMPANY), table.runs_in(conn, COMPANY)
        return TwoRuns(job1, job2, observer.seen, rows_final, runs_in, t0, history.ops())
    finally:
        first.close()
        second.close()
