"""Redlock over five real masters: a master that granted restarts, and a second client asks at once."""

import pytest

from scenarios.redlock_restart import RedlockRestart
from tests.server.helpers import processes_under, trial_env, verdict_of, lock_lost
from tests.server.test_lease_faults import no_holder_left

pytestmark = pytest.mark.server


def run(services, engines, variant):
    scenario = RedlockRestart()
    env = trial_env(services, engines, scenario.name, "redlock", variant, scenario.profile_params("quick"))
    measures = scenario.run_trial(env)
    assert no_holder_left()
    assert not list(services.tmp.glob("redlock-restart-*")), "a trial left its masters' files behind"
    assert not [p for p in processes_under(services.tmp) if "redlock-restart-" in p], "a master still runs"
    return measures, verdict_of(scenario, measures, "redlock")


def test_a_master_restarted_without_its_data_lets_a_second_client_hold_the_lock(services, engines):
    m, verdict = run(services, engines, "no_persistence")
    evidence = m["evidence"]
    assert evidence["masters"] == 5 and evidence["granted_by_before"] == 3  # a grant on exactly the quorum
    assert evidence["kept_its_keys"] is False and evidence["granted_by_after"] == 2
    assert m["contender"]["acquired"] is True and lock_lost(RedlockRestart(), m, "redlock")
    assert verdict == "stale write accepted"


def test_appendfsync_always_keeps_the_key_across_the_restart_and_the_second_client_out(services, engines):
    m, verdict = run(services, engines, "appendfsync_always")
    assert m["evidence"]["kept_its_keys"] is True and m["evidence"]["granted_by_after"] == 3
    assert m["contender"]["acquired"] is False and verdict == "held"
