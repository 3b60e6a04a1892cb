"""A Redis lock across a failover to a replica: real primary and replica pairs, one per trial."""

import shutil
import threading
from dataclasses import replace

import pytest

import backends
from lab.errors import ServiceError
from lab.faults import FaultNotConfirmed, RedisFailover, Target
from lab.servers.redis.replica import RedisWithReplica
from scenarios._failover_trial import NEVER_ACKNOWLEDGED
from scenarios.redis_failover import RedisFailover as RedisFailoverScenario
from tests.server.helpers import lock_lost, quick_trial

pytestmark = pytest.mark.server


def run(services, engines, backend, variant):
    scenario = RedisFailoverScenario()
    assert scenario.variant_skip(variant, backends.load(backend)) is None
    return quick_trial(services, engines, scenario, backend, variant, "redis-failover-")


def test_a_replica_that_never_got_the_grant_hands_out_the_same_fencing_token(services, engines):
    m, verdict = run(services, engines, "redis_fenced", "behind")
    assert any(key.endswith(":fence") for key in m["evidence"]["replica_lacked"])  # the INCR never reached it
    assert m["evidence"]["new_primary_role"] == "master"
    assert m["token_reused"] is True and m["contender"]["token"] == m["holder"]["token"]
    assert verdict == "stale write accepted"


def test_a_caught_up_replica_keeps_the_counter_so_the_fence_refuses_the_old_holder(services, engines):
    m, verdict = run(services, engines, "redis_fenced", "caught_up")
    assert m["token_reused"] is False
    assert verdict == "stale write rejected"


def test_without_a_fence_even_a_caught_up_failover_lets_two_holders_write(services, engines):
    m, verdict = run(services, engines, "redis", "caught_up")
    assert lock_lost(RedisFailoverScenario(), m, "redis") and verdict == "stale write accepted"  # the old primary still says the holder holds


def test_wait_for_one_replica_gives_back_a_grant_no_replica_has(services, engines):
    m, verdict = run(services, engines, "redis", "behind_wait")
    assert m["evidence"]["grant_waiting"]["given_back"].startswith("WAIT 1 ")
    assert m["holder"]["granted"] is False and m["contender"]["acquired"] is True
    assert verdict == NEVER_ACKNOWLEDGED


def test_the_fault_refuses_to_confirm_a_replica_that_was_not_promoted(services):
    root = services.tmp / "redis-failover-unconfirmed"
    pair = RedisWithReplica(root)
    try:
        pair.start()
        fault = RedisFailover()
        target = Target(replace(services, embedded={"redis": pair}, tmp=None), None, backends.load("redis"))
        with pytest.raises(FaultNotConfirmed, match="role 'slave'"):
            target.evidence["role_after"] = pair.client(pair.replica).info("replication")["role"]
            fault.confirm(target)
    finally:
        pair.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_the_scripted_failover_records_the_promotion_measures_managed_ones_are_set_beside(services, engines):
    """The control of the sentinel scenario: promoted at once, the old primary never demoted, so a probe straight to it
    is acknowledged until the trial ends, and none of it is on the promoted replica."""
    m, _ = run(services, engines, "redis", "caught_up")
    p = m["promotion"]
    assert p["manager"] == "scripted" and p["promote_s"] is not None and p["promote_s"] < 5
    assert p["old_primary_accepted"] > 0 and p["old_primary_writes_survived"] == 0
    assert p["old_primary_accepting_s"] >= m["healed_at"] - m["fault_at"] - 0.5  # it took writes up to the heal


def test_a_replica_is_in_sync_with_what_was_written_before_the_wait_even_while_writes_go_on(services):
    """The renewals of the locks under test keep a primary writing: the wait is for every byte written before it
    began (a moving target failed 20 Sentinel subjects in a reference run); a held-back link is reported."""
    root = services.tmp / "redis-failover-in-sync"
    pair, stop = RedisWithReplica(root), threading.Event()
    try:
        pair.start()
        client = pair.client(pair.primary)

        def write():
            n = 0
            while not stop.is_set():
                client.set("renewal", n)  # a write every round trip, as a crowd of renewing locks makes
                n += 1

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        client.set("grant", "holder")
        pair.wait_in_sync(within=10)
        assert pair.client(pair.replica).get("grant") == b"holder"  # what was written before the wait is there
        assert pair.hold_back() > 0
        client.set("after", "cut")
        with pytest.raises(ServiceError, match=r"within 1 s \(link .*, at \d+ of \d+\)"):
            pair.wait_in_sync(within=1)
    finally:
        stop.set()
        pair.stop()
        shutil.rmtree(root, ignore_errors=True)
