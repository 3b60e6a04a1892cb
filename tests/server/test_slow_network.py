"""A lock connection made slow or lossy for real (iptables and a netlink queue in a private network namespace): the
delay holds packets for the time asked, the loss drops the share asked, and what a lease does when its renewals
arrive late or are lost, each trial confirmed by its own probe and healed."""

import statistics

import pytest

from lab.faults.slow_network import NetDelay, NetLoss
from lab.servers.netns import NetNamespace
from lab.servers.nfqueue import DelayQueue
from lab.servers.slow_link import BOTH_WAYS, TO_SERVER, SlowLink
from scenarios.slow_network import SlowNetwork, slow_network_trial
from tests.server.helpers import assert_trial_left_nothing, lock_lost, outcome_of, trial_env

# iproute2's ip (the namespace's loopback) and ss, iptables for the rules, and root for the namespace: without
# them skipped with the install line.
pytestmark = [pytest.mark.server, pytest.mark.os_packages("iproute2", "iptables", root=True)]


def run(services, engines, backend, fault, variant):
    scenario = SlowNetwork()
    env = trial_env(services, engines, scenario.name, backend, variant, scenario.profile_params("default"))
    measures = dict(slow_network_trial(env, fault))
    assert_trial_left_nothing(services, "slownet-")
    return measures, outcome_of(scenario, measures, backend)


def test_the_queue_holds_each_packet_for_the_delay_asked_one_way_or_both_and_the_loss_drops_its_share():
    namespace = NetNamespace()
    assert namespace.fd is not None
    try:
        link = SlowLink(namespace)
        found = {}
        for direction, expected in ((BOTH_WAYS, 0.3), (TO_SERVER, 0.15)):
            queue = DelayQueue([7], 0.15)
            queue.start(namespace.fd)
            assert queue.echo_port is not None
            link.watch(queue.echo_port)
            try:
                found["before", expected] = statistics.median(queue.round_trips(5, 0.01, 1.0))
                link.delay({queue.echo_port: 7}, direction)
                found[expected] = statistics.median(queue.round_trips(5, 0.01, 1.0))
                link.clear()
                found["after", expected] = statistics.median(queue.round_trips(5, 0.01, 1.0))
            finally:
                link.clear()
                queue.release()
            record = queue.record(7)
            assert record["packets_held"] == (10 if direction is BOTH_WAYS else 5)
            assert 0.15 <= record["hold_s"]["min"] and record["hold_s"]["max"] <= 0.15 + 0.05
        loss = DelayQueue([], 0.0)
        loss.start(namespace.fd)
        assert loss.echo_port is not None
        link.watch(loss.echo_port)
        try:
            link.lose([loss.echo_port], 0.3, BOTH_WAYS)
            echoes = loss.round_trips(400, 0.0005, 0.3)
            counts = link.counts()
        finally:
            link.clear()
            loss.release()
    finally:
        namespace.close()
    assert all(found[key] < 0.01 for key in found if isinstance(key, tuple))  # loopback, and healed
    assert 0.3 <= found[0.3] <= 0.3 + 0.05  # both ways: twice the hold
    assert 0.15 <= found[0.15] <= 0.15 + 0.05  # toward the echo only: once
    seen, lost = counts[f"during:{loss.echo_port}"], counts[f"lost:{loss.echo_port}"]
    assert seen >= 400 and abs(lost / seen - 0.3) < 4 * (0.3 * 0.7 / seen) ** 0.5
    assert sum(e is None for e in echoes) > 0


def test_renewals_a_ttl_late_lose_the_lease_and_the_fence_refuses_the_holders_write(services, engines):
    """Every round trip a TTL longer: etcd's keep-alive (every TTL/3) reaches the server after the lease ran out."""
    m, outcome = run(services, engines, "etcd_fenced", NetDelay(1.0), "rtt_ttl")
    e = m["evidence"]
    assert e["fault"] == "net_delay" and e["strength"] == 1.0 and e["lock_packets_before"] > 0
    low, high = e["probe_rtt_within_s"]
    assert low <= e["probe_rtt_median_s"] <= high and abs(e["configured_rtt_added_s"] - m["ttl_s"]) < 1e-3
    assert e["lock_packets_held"]["packets_held"] > 0  # the holder's keep-alives went through the delay
    assert m["contender"]["acquired"] and m["holder"]["held_after"] is False
    assert m["holder"]["write"] == "rejected" and outcome["verdict"] == "stale write rejected"
    # Either the contender got the lease while the holder still believed it held, or the holder's keep-alive had
    # timed out first (etcd's client waits one TTL, the round trip's length): which, the race decides.
    told = m["holder"]["noticed_loss_at"]
    assert lock_lost(SlowNetwork(), m, "etcd_fenced") or (told is not None and told <= m["contender"]["granted_at"])


def test_renewals_a_third_of_a_ttl_late_keep_etcds_lease_or_the_fence_refuses(services, engines):
    """A third of a TTL more per round trip: one round trip per keep-alive, every TTL/3, lands within the TTL. On a
    busy machine it may not: either way the fence never accepts the holder's write after the contender's."""
    m, outcome = run(services, engines, "etcd_fenced", NetDelay(1 / 3), "rtt_third")
    assert m["evidence"]["probe_rtt_within_s"][0] <= m["evidence"]["probe_rtt_median_s"]
    if m["contender"]["acquired"]:
        assert outcome["verdict"] == "stale write rejected"
    else:
        assert m["holder"]["write"] == "committed" and outcome["verdict"] == "held"


def test_a_lossy_lock_connection_is_confirmed_by_the_drop_counters_and_the_fence_holds(services, engines):
    m, outcome = run(services, engines, "lease_row", NetLoss(0.3), "loss_30")
    e = m["evidence"]
    assert e["fault"] == "net_loss" and e["configured_share"] == 0.3
    assert abs(e["probe_share"] - 0.3) <= e["probe_share_within"] and e["probe_packets"] >= 400
    assert e["lock_packets_during"] >= e["lock_packets_dropped"]
    assert outcome["verdict"] in ("held", "stale write rejected")  # lost or not, a stale write never lands


def test_a_stale_holder_without_a_fence_has_its_write_accepted_when_its_renewal_comes_late(services, engines):
    """redis-py's first renewal is three round trips (EVALSHA, NOSCRIPT, SCRIPT LOAD, EVALSHA): a third of a TTL
    each is too late. What the holder was told is recorded as every lease fault records it."""
    m, outcome = run(services, engines, "redis_asyncio", NetDelay(1 / 3), "rtt_third")
    if m["contender"]["acquired"]:
        assert outcome["verdict"] == "stale write accepted"
        assert m["holder"]["signals"], "the holder was told nothing at all"
    else:
        assert outcome["verdict"] == "held"


@pytest.mark.os_packages("zookeeper")
def test_zookeeper_runs_inside_the_namespace_and_a_session_whose_pings_come_a_ttl_late_expires(services, engines):
    """ZooKeeper (a JVM) is started inside the trial's namespace like the other lock servers: the holder's kazoo
    session reaches it through the slowed port, the contender through a bridge. Its session timeout is the lease:
    with every round trip a TTL longer, the pings cannot keep it, and the fence decides what the holder wrote."""
    m, outcome = run(services, engines, "zookeeper_fenced", NetDelay(1.0), "rtt_ttl")
    e = m["evidence"]
    assert e["fault"] == "net_delay" and e["lock_packets_before"] > 0 and e["lock_packets_held"]["packets_held"] > 0
    assert e["probe_rtt_within_s"][0] <= e["probe_rtt_median_s"] <= e["probe_rtt_within_s"][1]
    assert outcome["verdict"] in ("held", "intact (250 rows)", "stale write rejected"), m
    assert m["rows_final"] == 250 and len(m["runs_in_final"]) == 1
    if m["contender"]["acquired"] and m["contender"]["granted_at"] < m["holder"]["write_at"]:
        assert m["holder"]["write"] == "rejected", m["holder"]  # only the fence keeps a lapsed session's write out


def test_every_lease_the_lab_runs_has_its_server_inside_the_namespace_zookeeper_included():
    """Not n/a for a lab limit: a lease on ZooKeeper (kazoo, zookeeper_fenced) applies as Redis', etcd's and
    PostgreSQL's do."""
    from backends import load

    for name in ("kazoo", "zookeeper_fenced", "redis", "etcd_fenced", "lease_row", "redlock"):
        assert NetDelay(1.0).applies_to(load(name)) is None and NetLoss(0.3).applies_to(load(name)) is None, name
