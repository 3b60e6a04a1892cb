"""A PostgreSQL primary crashes and its standby is promoted mid-hold: real pairs of servers, one per trial."""

import shutil
from dataclasses import replace

import pytest

import backends
from lab.faults import FaultNotConfirmed, Target
from lab.faults.failover import Failover
from lab.servers.postgres.pair import PostgresPair
from scenarios.base import Skip
from scenarios.failover import NEVER_ACKNOWLEDGED
from scenarios.failover import Failover as FailoverScenario
from tests.server.helpers import lock_lost, quick_trial, trial_env

pytestmark = pytest.mark.server


def run(services, engines, backend, variant):
    return quick_trial(services, engines, FailoverScenario(), backend, variant, "failover-")


def test_an_async_standby_behind_hands_the_lease_token_out_again_and_the_stale_write_is_accepted(services, engines):
    m, verdict = run(services, engines, "lease_row", "async_lagging")
    evidence = m["evidence"]
    assert evidence["timeline_after"] > evidence["timeline_before"]
    assert evidence["received_behind"] > 0  # the holder's acknowledged grant never reached the standby
    assert m["holder"]["granted"] is True and m["contender"]["acquired"] is True
    assert m["token_reused"] is True  # the new primary's sequence gave the contender the holder's token
    assert m["holder"]["write"] == "committed" and verdict == "stale write accepted"


def test_synchronous_replication_never_acknowledges_a_grant_the_standby_lacks(services, engines):
    m, verdict = run(services, engines, "lease_row", "sync_lagging")
    assert m["evidence"]["grant_waiting"]["query"].startswith("insert into")  # its commit waited on SyncRep
    assert m["holder"]["granted"] is False and m["holder"]["write"] == "none"
    assert m["contender"]["acquired"] is True and not lock_lost(FailoverScenario(), m, "lease_row")
    assert verdict == NEVER_ACKNOWLEDGED


def test_a_caught_up_async_standby_keeps_the_lease_row_and_its_holder(services, engines):
    m, verdict = run(services, engines, "lease_row", "async")
    assert m["evidence"]["received_behind"] == 0
    assert m["contender"]["acquired"] is False  # the replicated lease, renewed on the new primary, kept it out
    assert verdict == "held"


def test_a_session_advisory_lock_does_not_survive_a_failover(services, engines):
    m, verdict = run(services, engines, "session_autocommit", "async")
    assert m["evidence"]["advisory_locks_on_new_primary"] == 0  # locks live in memory, never in WAL
    assert lock_lost(FailoverScenario(), m, "session_autocommit") and verdict == "stale write accepted"


def test_the_fault_refuses_to_confirm_a_failover_that_did_not_happen(services):
    root = services.tmp / "failover-unconfirmed"
    root.mkdir()
    root.chmod(0o755)
    pair = PostgresPair(root, services.embedded["postgres"].bin)
    try:
        pair.start()
        cluster = replace(services, pg_url=pair.url, embedded={"postgres": pair}, tmp=None)
        monitor = pair.engine(pair.primary)
        try:
            with pytest.raises(FaultNotConfirmed, match="old primary still runs"):
                Failover().confirm(Target(cluster, monitor, backends.load("session")))
        finally:
            monitor.dispose()
    finally:
        pair.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_on_a_server_the_lab_did_not_start_the_trial_does_not_run(services, engines):
    scenario = FailoverScenario()
    env = trial_env(replace(services, embedded={}), engines, scenario.name, "session", "async",
                    scenario.profile_params("quick"))
    with pytest.raises(Skip, match="never fails over yours"):
        scenario.run_trial(env)


def test_the_scripted_control_records_its_promotion_as_the_managed_failover_does(services, engines):
    """The measures the report sets beside Patroni's: the crashed primary acknowledged nothing after the fault."""
    m, _ = run(services, engines, "session_autocommit", "async")
    promotion = m["promotion"]
    assert set(promotion) == {"manager", "promote_s", "old_primary_accepted", "old_primary_accepting_s",
                              "old_primary_writes_survived"}
    assert promotion["manager"] == "scripted" and 0 < promotion["promote_s"] < 30
    assert (promotion["old_primary_accepted"], promotion["old_primary_accepting_s"],
            promotion["old_primary_writes_survived"]) == (0, None, 0)
    assert m["evidence"]["probe"]["probe_refused"]  # its first write after the crash was refused
