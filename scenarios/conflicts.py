"""SERIALIZABLE without a lock: false conflicts between different companies, and its cost.

Eight different companies are rebuilt at once under SERIALIZABLE with no retry,
on three table designs: no index (every delete scans the table, so every
transaction reads what every other writes), an index with adjacent ids (their
index entries share pages) and an index with spread-out ids. Then ten companies
rebuilt by several runs at once: SERIALIZABLE with retry against the xact lock.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from lab.declarations.capabilities import Capability
from lab.checkers.measure_level import company_whole
from lab.measures.kinds import Measured
from lab.declarations.pacing import Lane, Pacing
from scenarios.base import Scenario, TrialEnv

DESIGNS = ("no_index", "adjacent_ids", "spread_ids")
CONCURRENT = 8


class Conflicts(Scenario):
    name = "conflicts"
    measured = Measured.CONFLICT_COST
    pacing = Pacing(lane=Lane.ALONE)  # its cost figures want the machine
    summary = "SERIALIZABLE false conflicts on 8 different companies (3 table designs); 10 companies vs the lock"
    variants = (*DESIGNS, "ten_companies")
    params = {
        "quick": {"trials": 1, "parallel": 1, "table_companies": 160, "rows": 250,
                  "ten_workers": 2, "ten_rows": 250},
        "default": {"trials": 3, "parallel": 1, "table_companies": 400, "rows": 250,
                    "ten_workers": 4, "ten_rows": 20000},
    }

    def applies_to(self, backend_cls) -> str | None:
        """SERIALIZABLE itself, or a lock taken inside each company's write (what it is set against)."""
        if not ({Capability.SERIALIZABLE, Capability.IN_TRANSACTION} & backend_cls.capabilities):
            return "sets SERIALIZABLE against a lock inside the write transaction"
        return None

    def variants_for(self, backend_cls) -> tuple[str, ...]:
        # The false-conflict counts are a SERIALIZABLE effect; the lock joins the 10-company race.
        return self.variants if Capability.SERIALIZABLE in backend_cls.capabilities else ("ten_companies",)

    def trial_seconds(self, profile: str) -> float:
        """Filling the table of companies, then eight (or ten) rebuilds at once, retried."""
        return 1.0 + self.profile_params(profile)["table_companies"] / 100

    def measured_seconds(self, measures: dict) -> float:
        """The ten-company runs' timed rebuilds (the eight-at-once trials time nothing)."""
        return float(measures.get("seconds", 0.0))

    def pg_sessions(self, backend_cls, profile: str) -> int:
        """Eight concurrent writers (CONCURRENT) and the observer."""
        return CONCURRENT + 2

    def run_trial(self, env: TrialEnv) -> dict:
        if env.spec.variant == "ten_companies":
            return self._ten_companies(env)
        return self._eight_at_once(env, env.spec.variant)

    def _eight_at_once(self, env: TrialEnv, design: str) -> dict:
        p = env.params
        table = env.table(index=design != "no_index")
        table.fill(env.writes, range(1, p["table_companies"] + 1), p["rows"])
        step = 1 if design != "spread_ids" else p["table_companies"] // CONCURRENT
        companies = [1 + i * step for i in range(CONCURRENT)]
        # Every transaction deletes, then waits until all eight have deleted: they truly overlap.
        barrier = threading.Barrier(CONCURRENT, timeout=30)

        def overlap_point(name, conn):
            if name == "after_delete":
                barrier.wait()

        def rebuild(company: int):
            backend = env.backend(table=table, options={"max_attempts": 1})
            try:
                return backend.rebuild(company, p["rows"], f"run{company}", overlap_point)
            finally:
                backend.close()

        with ThreadPoolExecutor(CONCURRENT) as pool:
            results = list(pool.map(rebuild, companies))
        failed = [r for r in results if r.outcome != "committed"]
        return {"design": design, "companies": companies, "rows": p["rows"],
                "table_companies": p["table_companies"], "failed": len(failed), "of": CONCURRENT,
                "errors": sorted({r.error for r in failed})}

    def _ten_companies(self, env: TrialEnv) -> dict:
        p = env.params
        companies = list(range(1, 11))
        table = env.table()
        table.fill(env.writes, companies, p["ten_rows"])

        def run(worker: int):
            backend = env.backend(table=table, key=env.key("ten"))
            try:
                order = companies  # every run walks the same companies in the same order: they collide
                return [backend.rebuild(c, p["ten_rows"], f"run{worker}") for c in order]
            finally:
                backend.close()

        start = time.monotonic()
        with ThreadPoolExecutor(p["ten_workers"]) as pool:
            results = [r for run_results in pool.map(run, range(p["ten_workers"])) for r in run_results]
        seconds = time.monotonic() - start
        with env.writes.connect() as conn:
            whole = [company_whole(p["ten_rows"], table.count(conn, c), table.runs_in(conn, c)) for c in companies]
        return {"seconds": round(seconds, 3), "workers": p["ten_workers"], "rows": p["ten_rows"],
                "rebuilds": len(results), "failed_attempts": sum(len(r.failed_attempts) for r in results),
                "gave_up": sum(r.outcome != "committed" for r in results),
                "companies_intact": sum(whole)}

    def verdict(self, measures: dict) -> str:
        if "design" in measures:
            return f"{measures['failed']} of {measures['of']} failed"
        intact = measures["companies_intact"] == 10 and measures["gave_up"] == 0
        return "all 10 intact" if intact else f"{10 - measures['companies_intact']} companies damaged"
