"""The post's company_design.py: two runs rebuild one 250-row company at once.

Run1 deletes and then holds its transaction open, so run2 starts while run1 is
mid-write: without a lock both commit and the company ends with 500 rows.
"""

from __future__ import annotations

import backends
from lab.declarations.capabilities import Capability
from lab.checkers.verdict import Verdict
from lab.declarations.columns import Column, FaultFamily
from lab.measures.kinds import Measured
from scenarios._two_runs import two_runs
from scenarios.base import Scenario, TrialEnv, judged

# The two runs' isolation level; the serializable backend always uses its own.
ISOLATION = {"two_runs": "READ COMMITTED", "repeatable_read": "REPEATABLE READ"}


class Overlap(Scenario):
    name = "overlap"
    measured = Measured.OVERLAP
    default_run = True
    summary = "one 250-row company rebuilt by two runs at once, READ COMMITTED (and REPEATABLE READ with the lock)"
    variants = ("two_runs", "repeatable_read")
    title = "two runs at once"
    columns = (
        Column("two_runs", "two runs at once", 5,
               "two runs rebuild the same companies at the same time; no fault, the contention itself",
               family=FaultFamily.TWO_RUNS, happens_when=()),
    )
    params = {
        "quick": {"hold_s": 0.3, "trials": 1, "parallel": 8},
        "default": {"hold_s": 0.7, "trials": 3, "parallel": 8},
    }

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        if variant == "repeatable_read" and Capability.IN_TRANSACTION not in backend_cls.capabilities:
            return "REPEATABLE READ is the post's rule 1 for a lock inside the transaction"
        return None

    def run_trial(self, env: TrialEnv) -> dict:
        hold = env.params["hold_s"]

        def hold_after_delete(name, conn, sync):
            if name == "after_delete":
                sync.started.set()
                sync.hold_until_met(env, conn, hold)  # run1 keeps its transaction open, so run2 overlaps it

        isolation = ISOLATION[env.spec.variant]
        result = two_runs(env, hold_after_delete, options={"isolation": isolation})
        if Capability.SERIALIZABLE in backends.load(env.spec.backend).capabilities:
            isolation = "SERIALIZABLE"
        return {"isolation": isolation, "hold_s": hold, **result.judged_measures()}

    def judge(self, measures: dict, backend_cls) -> Verdict:
        """The checkers: a refused run2 tested exclusion alone (held, not exercised); one that got past its lock
        left the company whole or not."""
        return judged(measures, backend_cls)
