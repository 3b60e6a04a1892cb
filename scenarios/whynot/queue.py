"""A queue that hands companies out: whether any company goes to two runs, and what a run asking for a taken one gets.

The post files "a queue" under alternatives that solve a neighbouring problem: it hands each company to one
worker (SELECT ... FOR UPDATE SKIP LOCKED on a job row), which is exclusion per company rather than a lock on
the run. This tests that promise for a backend that hands companies out (rebuild_next). First a second run asks
for the company a first run is rebuilding, while the company's job row is still the first run's uncommitted
insert and again once the job exists; then several runs pull companies from one queue until none is left, and
the trial reads whether any company went to two runs, any was missed, and every company is whole.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from backends.base import QueueWorker

from lab.declarations.capabilities import Capability
from lab.checkers.measure_level import company_state, company_whole
from lab.checkers.outcomes import Safety
from lab.workload.table import COMPANY_SIZE
from scenarios._two_runs import two_runs
from scenarios.base import TrialEnv
from scenarios.whynot._overlap import hold_run1_at
from scenarios.whynot.base import WaitingExperiment

RUNS = 3  # runs pulling from one queue at once


class Queue(WaitingExperiment):
    """A second run asking for a held company, then runs pulling one queue dry: duplicates, misses, intact."""

    variants = ("queue_exclusion",)
    requires = frozenset({Capability.QUEUE})
    reason = "hands out no companies (no rebuild_next)"

    def run(self, env: TrialEnv, variant: str) -> dict:
        companies = env.params["queue_companies"]
        asks = _second_asks(env)
        claims, seconds, whole = _pull_until_empty(env, companies)
        by_company: dict[int, list[str]] = {}
        for run, company, outcome in claims:
            if outcome == "committed":
                by_company.setdefault(company, []).append(run)
        per_run = {f"run{i}": sum(1 for r, _, o in claims if r == f"run{i}" and o == "committed")
                   for i in range(RUNS)}
        return {"companies": companies, "runs": RUNS,
                "hold_s": env.params["hold_s"], "second_asks": asks["existing_job"],
                "second_asks_new_job": asks["new_job"],
                "per_run": per_run, "rebuilt": len(by_company),
                "duplicates": sorted(c for c, rs in by_company.items() if len(rs) > 1),
                "missing": sorted(set(range(1, companies + 1)) - set(by_company)),
                "intact": all(whole.values()),
                "seconds": round(seconds, 4), "per_s": round(len(by_company) / seconds, 2) if seconds else None,
                "failed": sum(o != "committed" for _, _, o in claims)}

    def verdict(self, m: dict) -> str:
        return "a company went to two runs" if m["duplicates"] else "no company went to two runs"

    def safety(self, m: dict) -> Safety:
        pairs = [m["second_asks"], m["second_asks_new_job"]]
        whole = m["intact"] and all(p["whole"] for p in pairs)
        return Safety.UNSAFE if m["duplicates"] or not whole else Safety.SAFE


def _second_asks(env: TrialEnv) -> dict:
    """A second run asks for the company the first one is rebuilding: first while its job row is new (the first
    run's transaction creates it), then again once the job exists."""
    asks = {}
    for when in ("new_job", "existing_job"):
        pair = two_runs(env, hold_run1_at(env, "after_lock")).measures()
        second = pair["runs"][1]
        asks[when] = {"outcome": second["outcome"], "waited": second["waited"], "error": second["error"],
                      "company": company_state(COMPANY_SIZE, pair["rows_final"], pair["runs_in_final"]),
                      "whole": company_whole(COMPANY_SIZE, pair["rows_final"], pair["runs_in_final"])}
    return asks


def _pull_until_empty(env: TrialEnv, companies: int) -> tuple[list[tuple[str, int, str]], float, dict[int, bool]]:
    """Runs pull companies from one queue until it is empty: every (run, company, outcome) claimed, the seconds
    it took, and whether each company is whole afterwards."""
    table = env.table("pull")
    table.fill(env.writes, range(1, companies + 1), COMPANY_SIZE)
    key = env.key("pull")
    runs = [env.backend(table=table, key=key) for _ in range(RUNS)]
    workers = [cast(QueueWorker, run) for run in runs]  # the experiment applies only where Capability.QUEUE is declared
    claims: list[tuple[str, int, str]] = []
    claimed = threading.Lock()

    def pull(i: int) -> None:
        while True:
            company, result = workers[i].rebuild_next(COMPANY_SIZE, f"run{i}")
            if company is None:
                return
            with claimed:
                claims.append((f"run{i}", company, result.outcome))

    try:
        workers[0].enqueue(list(range(1, companies + 1)))
        start = time.monotonic()
        with ThreadPoolExecutor(RUNS) as pool:
            list(pool.map(pull, range(RUNS)))
        seconds = time.monotonic() - start
    finally:
        for run in runs:
            run.close()
    with env.monitor.connect() as conn:
        whole = {c: company_whole(COMPANY_SIZE, table.count(conn, c), table.runs_in(conn, c))
                 for c in range(1, companies + 1)}
    return claims, seconds, whole
