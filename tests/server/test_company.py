"""Method 4 and its rivals on the company workload, on a real PostgreSQL (the post's company_design)."""

import time

import pytest
from sqlalchemy import text

from scenarios.conflicts import Conflicts
from scenarios.kill import Kill
from scenarios.overlap import Overlap
from scenarios.perf import Perf
from scenarios.base import TrialEnv, TrialSpec
from scenarios.rules import Rules
from tests.server.helpers import trial_env, verdict_of

pytestmark = pytest.mark.server


def run(services, engines, scenario, backend, variant):
    env = trial_env(services, engines, scenario.name, backend, variant, scenario.profile_params("quick"))
    measures = scenario.run_trial(env)
    return measures, verdict_of(scenario, measures, backend)


def test_without_a_lock_two_rebuilds_merge_into_500_rows(services, engines):
    m, verdict = run(services, engines, Overlap(), "none", "two_runs")
    run1, run2 = m["runs"]
    assert (run1["deleted"], run2["deleted"]) == (250, 0)  # run2's delete skipped rows run1 had deleted
    assert m["rows_final"] == 500 and m["runs_in_final"] == ["run1", "run2"]
    assert verdict == "merged (500 rows)"


def test_with_the_xact_lock_the_second_rebuild_waits_and_replaces(services, engines):
    m, verdict = run(services, engines, Overlap(), "xact", "two_runs")
    run1, run2 = m["runs"]
    assert run2["waited"] >= 0.2 and run2["deleted"] == 250
    assert m["rows_final"] == 250 and m["runs_in_final"] == ["run2"]
    assert verdict == "intact (250 rows)"


class LateSecondRun(TrialEnv):
    """A trial whose second run asks for its lock three holds late, as on a loaded machine (planted)."""

    made = 0

    def backend(self, *args, **kwargs):
        made = super().backend(*args, **kwargs)
        self.made += 1
        if self.made == 2:
            acquire = made.acquire

            def late():
                time.sleep(3 * self.params["hold_s"])
                return acquire()

            made.acquire = late
        return made


@pytest.mark.parametrize("backend,expected", [("redis", "held"), ("none", "merged (500 rows)")])
def test_the_first_run_waits_for_a_late_second_run_to_meet_it(services, engines, backend, expected):
    """Two runs that never overlapped would read 'intact' for a try-lock and for no lock at all."""
    monitor, writes = engines
    scenario = Overlap()
    env = LateSecondRun(services, monitor, writes, f"test-{time.monotonic_ns()}",
                        TrialSpec("overlap", backend, "two_runs", 0), scenario.profile_params("quick"))
    m = scenario.run_trial(env)
    assert verdict_of(scenario, m, backend) == expected


def test_repeatable_read_with_the_lock_fails_after_the_wait(services, engines):
    m, _ = run(services, engines, Overlap(), "xact", "repeatable_read")
    run2 = m["runs"][1]
    assert run2["outcome"] == "failed" and run2["waited"] >= 0.2
    assert "could not serialize access due to concurrent delete" in run2["error"]
    assert m["rows_final"] == 250 and m["runs_in_final"] == ["run1"]


def test_serializable_retries_into_250_rows(services, engines):
    m, verdict = run(services, engines, Overlap(), "serializable", "two_runs")
    assert m["isolation"] == "SERIALIZABLE"
    assert m["runs"][1]["failed_attempts"] >= 1 and m["runs"][1]["outcome"] == "committed"
    assert verdict == "intact (250 rows)"


def test_a_killed_holder_rolls_back_with_its_lock(services, engines):
    m, verdict = run(services, engines, Kill(), "xact", "after_delete")
    assert m["holder_error"].startswith("OperationalError")
    assert m["run2_blocked"] is True
    waiter = m["runs"][1]
    assert waiter["outcome"] == "committed" and waiter["deleted"] == 250
    assert m["rows_seen"] == [250] and m["rows_final"] == 250
    assert verdict == "rolled back"  # the checkers: its right lapsed with its transaction, and run2 rebuilt


def test_lock_timeout_retries_the_company_instead_of_skipping_it(services, engines):
    m, verdict = run(services, engines, Rules(), "xact", "lock_timeout_retry")
    waiter = m["runs"][1]
    assert waiter["failed_attempts"] >= 1 and waiter["outcome"] == "committed"
    assert m["runs_in_final"] == ["run2"]
    assert verdict == "timed out, retried, rebuilt"


def test_opposite_lock_orders_deadlock_and_sorted_ones_do_not(services, engines):
    opposite, v1 = run(services, engines, Rules(), "xact", "opposite_batches")
    ordered, v2 = run(services, engines, Rules(), "xact", "sorted_batches")
    assert (opposite["deadlocks"], v1) == (1, "deadlock")
    assert (ordered["deadlocks"], v2) == (0, "no deadlock")
    assert all(r["outcome"] == "committed" for r in ordered["runs"])


@pytest.mark.parametrize("design, low, high", [("no_index", 6, 7), ("adjacent_ids", 4, 7), ("spread_ids", 0, 0)])
def test_serializable_false_conflicts_depend_on_the_table_design(services, engines, design, low, high):
    m, _ = run(services, engines, Conflicts(), "serializable", design)
    assert low <= m["failed"] <= high, m


def test_every_cost_configuration_leaves_every_company_whole(services, engines):
    perf, run_id = Perf(), f"perf-{time.monotonic_ns()}"
    for backend, variant in [("none", "one_transaction_for_all"), ("xact", "batch_50_sorted"),
                             ("xact", "workers_4"), ("xact", "per_company_lock_copy")]:
        env = trial_env(services, engines, "perf", backend, variant, perf.profile_params("quick"), run_id=run_id)
        m = perf.run_trial(env)
        assert m["failed"] == 0 and m["transactions"] >= 1
        assert (m["rows_final"], m["companies_final"]) == (100 * 220, 100)  # every company whole, once
        with engines[1].connect() as conn:  # each configuration had a fresh table of its own, gone after it
            assert conn.execute(text("select to_regclass(:t)"), {"t": m["table"]}).scalar() is None
