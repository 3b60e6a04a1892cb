"""The post's company_perf.py cost table: what a transaction, a lock and workers cost per company.

Each trial rebuilds a fresh table of companies x 220 rows, indexed on company_id, filled and
vacuumed before the clock starts: a configuration never meets the dead rows of the ones before it
(one shared table drifted 1.17 s -> 2.04 s -> 2.68 s over three repetitions). Each repetition runs
every configuration once, in its own shuffled order, so no configuration always goes first or
last; the report pairs each configuration with the baseline of the same repetition and gives
medians with min-max. Repetitions stop by the precision rule (RULE_TOLERANCE, at least RULE_FLOOR; the
profile's trials are the cap) once every configuration's paired ratio is tight enough.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from sqlalchemy import text

from backends.base import BatchRebuilder
from lab.measures.kinds import Measured
from lab.measures.precision import Rule
from lab.declarations.pacing import Lane, Pacing, Repeats
from lab.declarations.post_role import PostRole
from lab.workload.table import CompanyTable, table_name
from scenarios.base import Scenario, TrialEnv, TrialSpec

ROWS = 220  # rows per company in the post's cost runs
BASE = "one_transaction_for_all"  # what each configuration's ratio is paired with, as the report pairs it
# Every configuration's ratio to BASE within +-10% of its median, after three repetitions: the reference run's
# three spanned +-0 to +-8%, and the report calls a figure close to the post's within 25%.
RULE_TOLERANCE, RULE_FLOOR = 0.10, 3

# variant -> (the post's method it runs on, as a backend declares it, how it runs); the post's seconds are in
# lab/report/published.py
CONFIGS = {
    "one_transaction_for_all": (PostRole.NO_LOCK, "one transaction for all companies, no lock"),
    "transaction_per_company": (PostRole.NO_LOCK, "one transaction per company, no lock"),
    "per_company_lock": (PostRole.METHOD_4, "one transaction per company + xact lock"),
    "batch_50_sorted": (PostRole.METHOD_4, "50 companies per transaction + xact locks, sorted"),
    "workers_2": (PostRole.METHOD_4, "one transaction per company + xact lock, 2 workers"),
    "workers_4": (PostRole.METHOD_4, "one transaction per company + xact lock, 4 workers"),
    "workers_8": (PostRole.METHOD_4, "one transaction per company + xact lock, 8 workers"),
    "per_company_lock_copy": (PostRole.METHOD_4, "one transaction per company + xact lock, COPY instead of INSERT"),
}


class Perf(Scenario):
    name = "perf"
    measured = Measured.COST
    # Seconds per configuration, compared with each other: nothing beside it. Its repetitions stop once their
    # paired ratios are precise enough (still_needed).
    pacing = Pacing(lane=Lane.ALONE, repeats=Repeats.UNTIL_PRECISE)
    summary = "cost table: companies x 220 rows rebuilt per transaction, lock, batch, workers, COPY"
    variants = tuple(CONFIGS)
    params = {
        "quick": {"companies": 100, "trials": 1, "parallel": 1},
        "default": {"companies": 1200, "trials": 5, "parallel": 1},  # trials: the precision rule's cap
        "full": {"companies": 6000, "trials": 5, "parallel": 1},
    }

    def applies_to(self, backend_cls) -> str | None:
        if backend_cls.post_role not in {role for role, _ in CONFIGS.values()}:
            return "the cost table measures the post's configurations: no lock, and its method 4 (the xact lock)"
        return None

    def variants_for(self, backend_cls) -> tuple[str, ...]:
        return tuple(v for v, (role, _) in CONFIGS.items() if role == backend_cls.post_role)

    def plan(self, backend_classes, profile: str) -> list[TrialSpec]:
        """Repetition by repetition, each repetition's configurations in an order of its own (seeded by the
        repetition, so a resumed run plans the same order)."""
        specs = super().plan(backend_classes, profile)
        skipped = [s for s in specs if s.skip is not None]
        ordered = []
        for index in sorted({s.index for s in specs if s.skip is None}):
            group = [s for s in specs if s.skip is None and s.index == index]
            random.Random(f"perf-{index}").shuffle(group)
            ordered += group
        return skipped + ordered

    @staticmethod
    def _table(env: TrialEnv, companies: int) -> CompanyTable:
        """A fresh cost table for this trial: filled, vacuumed and analyzed, so every configuration starts
        from the same table."""
        table = CompanyTable(table_name(f"{env.run_id}_perf_{env.spec.variant}_{env.spec.index}"))
        table.create(env.monitor, index=True)
        table.fill(env.writes, range(1, companies + 1), ROWS)
        with env.monitor.connect() as conn:  # AUTOCOMMIT: VACUUM cannot run inside a transaction
            conn.execute(text(f"vacuum analyze {table.name}"))
        return table

    def trial_seconds(self, profile: str) -> float:
        """Filling its fresh table, then rebuilding every company: about 2 to 7 s per 1200 companies here."""
        return self.profile_params(profile)["companies"] / 250

    def rule(self, profile: str) -> Rule:
        cap = self.profile_params(profile)["trials"]
        return Rule(RULE_TOLERANCE, min(RULE_FLOOR, cap), cap)

    @staticmethod
    def paired(done: list[dict]) -> tuple[list[list[float]], bool]:
        """Each configuration's seconds over BASE's, one per complete repetition, and whether a repetition is
        still under way (some of its configurations done, not all)."""
        by_rep: dict[int, dict[str, float]] = {}
        for record in done:
            by_rep.setdefault(record["index"], {})[record["variant"]] = record["measures"]["seconds"]
        variants = {v for rep in by_rep.values() for v in rep}
        complete = [rep for _, rep in sorted(by_rep.items()) if set(rep) == variants and rep.get(BASE)]
        series = [[rep[v] / rep[BASE] for rep in complete] for v in sorted(variants - {BASE})]
        return series, len(complete) < len(by_rep)

    def still_needed(self, profile: str, spec: TrialSpec, done: list[dict]) -> bool:
        """Its pacing's Repeats.UNTIL_PRECISE, a hook because it reads the finished trials' measures: a repetition
        under way completes; a new one starts only while some configuration's paired ratios are not yet within the
        rule."""
        if any(record["index"] == spec.index for record in done):
            return True
        series, under_way = self.paired(done)
        return under_way or not (series and self.rule(profile).enough(*series))

    def precision(self, profile: str, done: list[dict]) -> dict | None:
        series, _ = self.paired(done)
        return self.rule(profile).outcome(*series) if series else None

    def measured_seconds(self, measures: dict) -> float:
        """The timed rebuild of every company: the figure itself (filling and vacuuming the table are not)."""
        return float(measures.get("seconds", 0.0))

    def pg_sessions(self, backend_cls, profile: str) -> int:
        """Its most workers, each in its own write transaction, the observer and the table's setup."""
        return max(_workers(variant) for variant in CONFIGS) + 2

    def run_trial(self, env: TrialEnv) -> dict:
        variant, companies = env.spec.variant, env.params["companies"]
        table = self._table(env, companies)
        ids = list(range(1, companies + 1))
        run_id = f"{variant}-{env.spec.index}"
        workers = _workers(variant)
        try:
            start = time.monotonic()
            if workers > 1:
                with ThreadPoolExecutor(workers) as pool:
                    outcomes = [o for part in pool.map(lambda w: self._rebuild(env, table, ids[w::workers], run_id,
                                                                              variant), range(workers)) for o in part]
            else:
                outcomes = self._rebuild(env, table, ids, run_id, variant)
            seconds = time.monotonic() - start
            with env.monitor.connect() as conn:  # after the clock: every company must be whole, once
                rows_final, companies_final = conn.execute(
                    text(f"select count(*), count(distinct company_id) from {table.name}")).one()
        finally:
            with env.monitor.connect() as conn:
                conn.execute(text(f"drop table if exists {table.name}"))
        return {"config": CONFIGS[variant][1], "seconds": round(seconds, 3), "companies": companies,
                "rows": companies * ROWS, "rows_final": rows_final, "companies_final": companies_final,
                "table": table.name, "workers": workers, "transactions": len(outcomes),
                "failed": sum(o != "committed" for o in outcomes)}

    @staticmethod
    def _rebuild(env: TrialEnv, table: CompanyTable, ids: list[int], run_id: str, variant: str) -> list[str]:
        backend = env.backend(table=table)
        batches = cast(BatchRebuilder, backend)  # the batch variants run on backends declaring batch_rebuild
        try:
            if variant == "one_transaction_for_all":
                return [batches.rebuild_batch(ids, ROWS, run_id).outcome]
            if variant == "batch_50_sorted":
                return [batches.rebuild_batch(ids[i:i + 50], ROWS, run_id).outcome for i in range(0, len(ids), 50)]
            if variant == "per_company_lock_copy":
                return [batches.rebuild_batch([c], ROWS, run_id, use_copy=True).outcome for c in ids]
            return [backend.rebuild(c, ROWS, run_id).outcome for c in ids]
        finally:
            backend.close()

    def verdict(self, measures: dict) -> str:
        return "completed" if measures["failed"] == 0 else f"{measures['failed']} transactions failed"


def _workers(variant: str) -> int:
    """How many runs a cost configuration rebuilds with at once (workers_8: eight)."""
    return int(variant.split("_")[1]) if variant.startswith("workers_") else 1
