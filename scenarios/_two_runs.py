"""Two runs of the job on one company, the second started while the first is inside its write."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from lab.errors import LabError
from lab.harness import ops
from lab.harness.history import History
from lab.harness.job import JobResult, run_job
from lab.harness.workload import COMPANY_SIZE, Observer
from scenarios.base import TrialEnv

COMPANY = 1


@dataclass
class Sync:
    """Signals between run1's hook and the trial: when run2 may start, and when it has finished."""

    started: threading.Event
    second_done: threading.Event


@dataclass
class TwoRuns:
    """What a two-run trial produced: both jobs, what the observer saw, and the company at the end."""

    first: JobResult
    second: JobResult
    rows_seen: list[int]
    rows_final: int
    runs_in: list[str]
    t0: float
    events: list[dict]

    def measures(self) -> dict:
        """The runs' summaries and the company's counts."""
        return {"rows": COMPANY_SIZE, "runs": [self.first.summary(self.t0), self.second.summary(self.t0)],
                "rows_seen": self.rows_seen, "rows_final": self.rows_final, "runs_in_final": self.runs_in}

    def judged_measures(self) -> dict:
        """measures() with the trial's history and final table, for a scenario the checkers judge."""
        return {**self.measures(), "history": ops.to_json(ops.from_events(self.events)),
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
    sync = Sync(threading.Event(), threading.Event())
    t0 = time.monotonic()
    history = History(t0)
    seen = Observer(env.monitor, table, COMPANY,
                    on_change=lambda company, count: history.add("observer", "observed", company=company, count=count))
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
        return TwoRuns(job1, job2, observer.seen, rows_final, runs_in, t0, history.to_list())
    finally:
        first.close()
        second.close()
