"""The unique backstop's loser: what the second of two overlapping rebuilds sees when a unique marker guards it.

The post answers "why not a unique constraint?" with: it is a backstop, not exclusion. This tests that for a
backend that keeps a unique marker row per company (marker_table): two rebuilds overlap, run1 held after its
delete, and the trial reads what the loser saw (whether it waited on the winner's uncommitted marker, then
failed with 23505 or rebuilt), whether it touched a row while the winner wrote, whether any marker was left
behind, and whether a third rebuild afterwards still goes through (the marker went with its transaction).
"""

from __future__ import annotations

from sqlalchemy import text

import backends
from lab.declarations.capabilities import Capability
from lab.checkers.measure_level import company_state, company_whole
from lab.checkers.outcomes import Safety
from lab.workload.table import COMPANY_SIZE, CompanyTable
from scenarios._two_runs import COMPANY, two_runs
from scenarios.base import TrialEnv
from scenarios.whynot._overlap import hold_run1_at, two_runs_table
from scenarios.whynot.base import WaitingExperiment


class Backstop(WaitingExperiment):
    """Two overlapping rebuilds under a unique marker: what the loser saw, and the company after both."""

    variants = ("backstop_loser",)
    requires = frozenset({Capability.UNIQUE_MARKER})
    reason = "keeps no unique marker row"

    def run(self, env: TrialEnv, variant: str) -> dict:
        cls = backends.load(env.spec.backend)
        result = two_runs(env, hold_run1_at(env))
        m = result.measures()
        winner, loser = m["runs"]
        with env.monitor.connect() as conn:
            markers_left = conn.execute(text(f"select count(*) from {cls.marker_table} where scope = :s"),
                                        {"s": env.key()}).scalar()
        # Afterwards, with the first rebuild's marker gone: a third rebuild of the company goes through.
        later = env.backend(table=CompanyTable(two_runs_table(env)))
        try:
            after = later.rebuild(COMPANY, COMPANY_SIZE, "run3")
        finally:
            later.close()
        company = company_state(COMPANY_SIZE, m["rows_final"], m["runs_in_final"])
        torn = [n for n in m["rows_seen"] if n != COMPANY_SIZE]
        return {"hold_s": env.params["hold_s"], "runs": m["runs"], "rows_seen": m["rows_seen"],
                "rows_final": m["rows_final"], "runs_in_final": m["runs_in_final"], "company": company, "torn": torn,
                "whole": company_whole(COMPANY_SIZE, m["rows_final"], m["runs_in_final"]),
                "loser_deleted": loser["deleted"], "loser_saw": _loser_saw(loser, env.params["hold_s"]),
                "markers_left": markers_left, "winner": winner["outcome"], "later_rebuild": after.outcome,
                "later_error": after.error}

    def verdict(self, m: dict) -> str:
        return m["loser_saw"]

    def safety(self, m: dict) -> Safety:
        return Safety.SAFE if m["whole"] and not m["torn"] else Safety.UNSAFE


def _loser_saw(loser: dict, hold: float) -> str:
    """What the second run met, in words chosen by its outcome, its SQLSTATE and how long it waited."""
    if loser["outcome"] == "committed":
        return "loser waited, then rebuilt" if loser["waited"] >= hold / 2 else "loser rebuilt at once"
    if loser["sqlstate"] == "23505":
        return "loser failed with 23505 after waiting" if loser["waited"] >= hold / 2 else \
            "loser failed with 23505 at once"
    return f"loser {loser['outcome']}"
