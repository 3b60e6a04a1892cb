"""The post's company_perf.py cost table: what a transaction, a lock and workers cost per company.

One table of companies x 220 rows, indexed on company_id, is rebuilt whole by each
configuration. Configurations alternate (A B C ... A B C ...) so a noisy machine
spreads over all of them, and the report gives medians with min-max.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from lab.harness.workload import CompanyTable, table_name
from scenarios.base import Scenario, TrialEnv

ROWS = 220  # rows per company in the post's cost runs

# variant -> (backend it runs on, how it runs); the post's seconds are in lab/report/published.py
CONFIGS = {
    "one_transaction_for_all": ("none", "one transaction for all companies, no lock"),
    "transaction_per_company": ("none", "one transaction per company, no lock"),
    "per_company_lock": ("xact", "one transaction per company + xact lock"),
    "batch_50_sorted": ("xact", "50 companies per transaction + xact locks, sorted"),
    "workers_2": ("xact", "one transaction per company + xact lock, 2 workers"),
    "workers_4": ("xact", "one transaction per company + xact lock, 4 workers"),
    "workers_8": ("xact", "one transaction per company + xact lock, 8 workers"),
    "per_company_lock_copy": ("xact", "one transaction per company + xact lock, COPY instead of INSERT"),
}


class Perf(Scenario):
    name = "perf"
    summary = "cost table: companies x 220 rows rebuilt per transaction, lock, batch, workers, COPY"
    variants = tuple(CONFIGS)
    params = {
        "quick": {"companies": 100, "trials": 1, "parallel": 1},
        "default": {"companies": 1200, "trials": 3, "parallel": 1},
        "full": {"companies": 6000, "trials": 3, "parallel": 1},
    }

    def __init__(self):
        self._tables: dict[str, CompanyTable] = {}
        self._lock = threading.Lock()

    def applies_to(self, backend_cls) -> str | None:
        if backend_cls.name not in {backend for backend, _ in CONFIGS.values()}:
            return "the cost table measures the none and xact configurations"
        return None

    def variants_for(self, backend_cls) -> tuple[str, ...]:
        return tuple(v for v, (backend, _) in CONFIGS.items() if backend == backend_cls.name)

    def _table(self, env: TrialEnv, companies: int) -> CompanyTable:
        """The run's one cost table, created and filled by the first trial that needs it."""
        with self._lock:
            if env.run_id not in self._tables:
                table = CompanyTable(table_name(f"{env.run_id}_perf_{companies}"))
                table.create(env.monitor, index=True)
                table.fill(env.writes, range(1, companies + 1), ROWS)
                self._tables[env.run_id] = table
            return self._tables[env.run_id]

    def trial_seconds(self, profile: str) -> float:
        """One configuration rebuilding every company: about 1.2 to 6.5 s per 1200 companies here."""
        return self.profile_params(profile)["companies"] / 300

    def pg_sessions(self, backend_cls, profile: str) -> int:
        """Its most workers, each in its own write transaction, the observer and the table's setup."""
        return max(_workers(variant) for variant in CONFIGS) + 2

    def run_trial(self, env: TrialEnv) -> dict:
        variant, companies = env.spec.variant, env.params["companies"]
        table = self._table(env, companies)
        ids = list(range(1, companies + 1))
        run_id = f"{variant}-{env.spec.index}"
        workers = _workers(variant)
        start = time.monotonic()
        if workers > 1:
            with ThreadPoolExecutor(workers) as pool:
                outcomes = [o for part in pool.map(lambda w: self._rebuild(env, table, ids[w::workers], run_id,
                                                                          variant), range(workers)) for o in part]
        else:
            outcomes = self._rebuild(env, table, ids, run_id, variant)
        seconds = time.monotonic() - start
        return {"config": CONFIGS[variant][1], "seconds": round(seconds, 3), "companies": companies,
                "rows": companies * ROWS, "workers": workers, "transactions": len(outcomes),
                "failed": sum(o != "committed" for o in outcomes)}

    @staticmethod
    def _rebuild(env: TrialEnv, table: CompanyTable, ids: list[int], run_id: str, variant: str) -> list[str]:
        backend = env.backend(table=table)
        try:
            if variant == "one_transaction_for_all":
                return [backend.rebuild_batch(ids, ROWS, run_id).outcome]
            if variant == "batch_50_sorted":
                return [backend.rebuild_batch(ids[i:i + 50], ROWS, run_id).outcome for i in range(0, len(ids), 50)]
            if variant == "per_company_lock_copy":
                return [backend.rebuild_batch([c], ROWS, run_id, use_copy=True).outcome for c in ids]
            return [backend.rebuild(c, ROWS, run_id).outcome for c in ids]
        finally:
            backend.close()

    def verdict(self, measures: dict) -> str:
        return "completed" if measures["failed"] == 0 else f"{measures['failed']} transactions failed"


def _workers(variant: str) -> int:
    """How many runs a cost configuration rebuilds with at once (workers_8: eight)."""
    return int(variant.split("_")[1]) if variant.startswith("workers_") else 1
