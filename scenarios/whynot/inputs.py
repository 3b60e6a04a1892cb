"""An idempotent rebuild: two overlapping runs with the same inputs, and with each run's own.

The post files "an idempotent rebuild" under alternatives that solve a neighbouring problem: an upsert on a
natural key makes a repeated run with the same inputs harmless, but it does not keep two runs apart, so when
their inputs differ (the post's overlap, each run its own) whichever commits last decides the company. This
tests both for a backend that upserts on a natural key: same_inputs gives both runs one input; different_inputs
gives each its own. Each trial overlaps twice, run1 held after its delete and then before its commit; the
company's final rows say whether they are whole and whose, and whether the newer run's output (run2 starts
last) survived the older one committing after it.
"""

from __future__ import annotations

from sqlalchemy import text

from lab.declarations.capabilities import Capability
from lab.workload.table import COMPANY_SIZE
from scenarios._two_runs import COMPANY, two_runs
from scenarios.base import TrialEnv
from scenarios.whynot._overlap import hold_run1_at, two_runs_table
from scenarios.whynot.base import WaitingExperiment

SAME = "inputs-v1"  # the one input both runs of same_inputs rebuild from


class IdempotentInputs(WaitingExperiment):
    """Two overlapping upserting rebuilds, with one input for both (same_inputs) or each its own
    (different_inputs)."""

    variants = ("same_inputs", "different_inputs")
    requires = frozenset({Capability.NATURAL_KEY})
    reason = "writes no upsert on a natural key"

    def run(self, env: TrialEnv, variant: str) -> dict:
        """Two overlapping rebuilds, held after run1's delete and (a second overlap) before run1's commit."""
        same = variant == "same_inputs"
        options = {"inputs": SAME} if same else {}
        overlaps = {}
        for point in ("after_delete", "before_commit"):
            result = two_runs(env, hold_run1_at(env, point), options=options)
            m = result.measures()
            last = last_committers(m["runs"])
            final = _final_rows(env)
            expected = [[options["inputs"]]] if same else [[run] for run in last]
            overlaps[point] = {"runs": m["runs"], "rows_seen": m["rows_seen"], "final": final,
                               "last_committer": " or ".join(last), "started_last": "run2",
                               "whole": final["rows"] == COMPANY_SIZE == final["distinct_n"]
                               and (final["min_n"], final["max_n"]) == (1, COMPANY_SIZE),
                               "tags_expected": expected, "tags_as_expected": final["tags"] in expected}
        identical = all(o["whole"] and o["tags_as_expected"] for o in overlaps.values())
        return {"same": same, "inputs": options.get("inputs", "each run's own id"),
                "hold_s": env.params["hold_s"], "overlaps": overlaps, "identical": identical if same else None,
                "last_committer_won": all(o["whole"] and o["tags_as_expected"] for o in overlaps.values()),
                "newest_kept": {p: o["final"]["tags"] == ["run2"] for p, o in overlaps.items()}}

    def verdict(self, m: dict) -> str:
        if m["same"]:
            return "same rows" if m["identical"] else "rows differ"
        if not m["last_committer_won"]:
            return "rows of neither run alone"
        lost = sum(not kept for kept in m["newest_kept"].values())
        return (f"last committer's rows kept; the newer run's output overwritten in {lost} of "
                f"{len(m['newest_kept'])} overlaps")


def last_committers(runs: list[dict]) -> list[str]:
    """The run that committed last, by when each run's commit returned (`ended`, in ms); both when they ended
    within the same millisecond, where the clock cannot order them (the second, blocked on the first's rows,
    returns right after it) and either run's rows alone are the last committer's."""
    latest = max(run["ended"] for run in runs)
    return sorted(run["run"] for run in runs if run["ended"] == latest)


def _final_rows(env: TrialEnv) -> dict:
    """The company's rows after both runs: how many, their n's spread, and whose run tags they carry."""
    with env.monitor.connect() as conn:
        row = conn.execute(text(f"select count(*), count(distinct n), min(n), max(n), "
                                f"array_agg(distinct run_id order by run_id) from {two_runs_table(env)} "
                                f"where company_id = :c"), {"c": COMPANY}).one()
    return {"rows": row[0], "distinct_n": row[1], "min_n": row[2], "max_n": row[3], "tags": list(row[4] or [])}
