"""The post's Why-not alternatives on a real PostgreSQL: each claim of the table shown, or shown wrong, for real."""

import pytest

from scenarios.cases import Cases
from scenarios.whynot import WhyNot
from tests.server.helpers import trial_env

pytestmark = pytest.mark.server

PARAMS = WhyNot().profile_params("quick")


def whynot(services, engines, backend, variant):
    scenario = WhyNot()
    measures = scenario.run_trial(trial_env(services, engines, "whynot", backend, variant, PARAMS))
    return measures, scenario.verdict(measures)


def test_the_guard_set_to_0_on_the_session_keeps_the_lock_where_the_default_connection_loses_it(services, engines):
    lost = Cases().run_trial(trial_env(services, engines, "cases", "session", "idle_in_transaction",
                                       {"timeout_s": 1.0}))
    kept = Cases().run_trial(trial_env(services, engines, "cases", "session_guard_off", "idle_in_transaction",
                                       {"timeout_s": 1.0}))
    assert [p["got"] for p in lost["probes"]] == [False, True]
    assert lost["server_said"] == "terminating connection due to idle-in-transaction timeout"
    assert kept["holder_state"] == "idle in transaction"  # the same open transaction as method 1
    assert [p["got"] for p in kept["probes"]] == [False, False]
    assert kept["held_after"] is True and kept["next_query"] == "alive" and kept["release"] == "released"
    assert kept["server_said"] is None


def test_the_guard_off_lock_holds_no_horizon_until_its_transaction_has_an_xid(services, engines):
    m, verdict = whynot(services, engines, "session_guard_off", "xmin_horizon")
    assert m["backend"]["held_after"] and m["backend"]["state"] == "idle in transaction"
    assert m["backend"]["xmin_age"] is None and m["backend"]["xid_age"] is None
    assert m["backend"]["not_removable"] == m["baseline"]["not_removable"] == 0
    assert verdict == "holds back nothing"
    # The same kind of session once its transaction has an id: every dead row of the run stays.
    assert m["open_xid"]["xid_age"] > 0
    assert m["open_xid"]["not_removable"] == m["open_xid"]["deleted"]


def test_a_child_insert_waits_under_for_update_and_not_under_for_no_key_update(services, engines):
    blocked, verdict = whynot(services, engines, "row_lock", "fk_child_insert")
    assert verdict == "child insert waited"
    assert blocked["child_during"]["outcome"] == "committed"
    assert blocked["child_during"]["seconds"] >= 0.8 * blocked["hold_s"]
    assert blocked["child_ended_after_holder_commit"] is True
    free, verdict = whynot(services, engines, "row_lock_no_key", "fk_child_insert")
    assert verdict == "child insert did not wait"
    assert free["child_during"]["seconds"] < free["hold_s"] / 2
    assert free["child_ended_after_holder_commit"] is False


def test_a_company_without_a_parent_row_is_unprotected_unless_the_parent_is_created_first(services, engines):
    m, _ = whynot(services, engines, "row_lock", "no_parent_row")
    assert m["lock_only"]["parent_rows_after"] == 0
    assert m["lock_only"]["company"] == "merged (500 rows)"
    assert m["create"]["parent_rows_after"] == 1
    assert m["create"]["company"] == "intact (250 rows)"


def test_the_unique_backstops_loser_fails_after_waiting_and_touches_nothing(services, engines):
    m, verdict = whynot(services, engines, "unique_backstop", "backstop_loser")
    loser = m["runs"][1]
    assert loser["outcome"] == "failed" and loser["sqlstate"] == "23505"
    assert "duplicate key" in loser["error"]
    assert loser["waited"] >= 0.8 * m["hold_s"]  # it queued on the winner's uncommitted marker first
    assert m["loser_deleted"] is None and m["torn"] == [] and m["company"] == "intact (250 rows)"
    assert m["runs_in_final"] == ["run1"] and m["markers_left"] == 0 and m["later_rebuild"] == "committed"
    assert verdict == "loser failed with 23505 after waiting"


def test_idempotent_holds_with_the_same_inputs_and_not_with_different_ones(services, engines):
    same, verdict = whynot(services, engines, "idempotent", "same_inputs")
    assert verdict == "same rows"
    for overlap in same["overlaps"].values():
        assert overlap["final"] == {"rows": 250, "distinct_n": 250, "min_n": 1, "max_n": 250, "tags": ["inputs-v1"]}
    different, _ = whynot(services, engines, "idempotent", "different_inputs")
    finals = {point: o["final"]["tags"] for point, o in different["overlaps"].items()}
    # Whole companies, but whose: the last committer's, so the older run's when it commits last.
    assert finals == {"after_delete": ["run1"], "before_commit": ["run2"]}
    assert different["newest_kept"] == {"after_delete": False, "before_commit": True}


def test_the_queue_never_gives_one_company_to_two_runs(services, engines):
    m, verdict = whynot(services, engines, "queue", "queue_exclusion")
    assert m["duplicates"] == [] and m["missing"] == [] and m["intact"] is True
    assert m["rebuilt"] == m["companies"] == sum(m["per_run"].values())
    # A second run asking for a company the first is rebuilding moves on at once: SKIP LOCKED never waits...
    assert m["second_asks"]["outcome"] == "skipped" and m["second_asks"]["waited"] < PARAMS["hold_s"] / 2
    # ...except while the job row is the first run's own uncommitted insert: then it waits on its key, and skips.
    assert m["second_asks_new_job"]["outcome"] == "skipped"
    assert m["second_asks_new_job"]["waited"] >= 0.8 * PARAMS["hold_s"]
    assert verdict == "no company went to two runs"


def test_the_lock_on_the_writes_connection_serializes_the_runs_writes(services, engines):
    m, verdict = whynot(services, engines, "session_on_writes", "throughput")
    assert [r["in_flight_peak"] for r in m["backend"]] == [1, 1, 1]
    assert [r["in_flight_peak"] for r in m["baseline"]] == [1, 2, 4]
    assert verdict.startswith("serialized: 1 of 4 workers' writes in flight at once")
