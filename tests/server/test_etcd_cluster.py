"""Three real etcd members on loopback: one partitioned from the other two, or the leader killed, mid-hold."""

import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

import backends
from lab.faults import FaultNotConfirmed, Target
from lab.faults.etcd_partition import EtcdPartition
from lab.servers.clients import etcd_client
from lab.servers.etcd.cluster import EtcdCluster
from scenarios.etcd_partition import EtcdPartition as EtcdPartitionScenario
from tests.server.helpers import processes_under, trial_env, verdict_of, outcome_of
from tests.server.test_lease_faults import no_holder_left

pytestmark = pytest.mark.server


@pytest.fixture
def cluster(services):
    root = Path(tempfile.mkdtemp(prefix="etcd-cluster-", dir=services.tmp))
    running = EtcdCluster(root)
    running.start()
    yield running
    running.stop()
    shutil.rmtree(root, ignore_errors=True)


def left_behind(services) -> list[str]:
    return [str(p) for p in services.tmp.glob("etcd-cluster-*")] + \
        [p for p in processes_under(services.tmp) if "etcd-cluster-" in p]


def run(services, engines, backend, variant):
    scenario = EtcdPartitionScenario()
    env = trial_env(services, engines, scenario.name, backend, variant, scenario.profile_params("quick"))
    measures = scenario.run_trial(env)
    assert no_holder_left()
    assert not left_behind(services), "a trial left a member or its data behind"
    return measures, verdict_of(scenario, measures, backend)


def wait_for(check, within=5.0):
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "the members never showed it"
        time.sleep(0.05)


def test_an_isolated_member_loses_its_leader_and_falls_behind_while_the_other_two_go_on(cluster):
    leader = cluster.wait_leader()
    member = next(m for m in cluster.members if m is not leader)
    others = [m for m in cluster.members if m is not member]
    cluster.isolate(member)
    wait_for(lambda: cluster.status(member)["leader"] is None)
    assert cluster.health(member) == {"health": "false", "reason": "RAFT NO LEADER"}
    stuck = cluster.status(member)["raft_index"]
    cluster.probe_write(leader)
    assert {cluster.status(m)["leader"] for m in others} == {leader.name}
    assert min(cluster.status(m)["raft_index"] for m in others) > stuck
    assert cluster.status(member)["raft_index"] == stuck  # nothing reaches it, whoever dialed the link
    crossing = cluster.link_bytes(member)["crossing"]
    time.sleep(0.5)  # heartbeats every 100 ms would cross a leaky partition in this time
    assert cluster.link_bytes(member)["crossing"] == crossing
    cluster.heal()
    wait_for(lambda: cluster.status(member)["leader"] == leader.name
             and cluster.status(member)["raft_index"] >= cluster.status(leader)["raft_index"])


def test_the_fault_refuses_a_partition_that_did_not_happen(services, cluster):
    contender = cluster.followers()[-1]
    scoped = replace(services, etcd_endpoint=contender.endpoint, embedded={"etcd": cluster}, tmp=None)
    fault = EtcdPartition()
    fault.route(scoped, backends.load("etcd"))
    target = Target(scoped, None, backends.load("etcd"))
    with pytest.raises(FaultNotConfirmed, match="never made"):
        fault.confirm(target)
    # A one-way block: only connections the others dial to the member are dropped. It still hears the
    # leader over the streams it dialed itself, so it keeps its leader, and the fault says so.
    for m in cluster.members:
        m.peer_proxy._cut = lambda dialer, to: dialer is not None and to in cluster.isolated and dialer != to
    holder = cluster.member(fault.holder_member)
    client = etcd_client(holder.endpoint)  # a holder's client on its member, through that member's proxy
    client.put("locklab-test/one-way", "x")
    fault.inject(target)
    with pytest.raises(FaultNotConfirmed, match=f"{holder.name} follows m[0-9].*not a partition"):
        fault.confirm(target, within=3.0)
    assert cluster.status(holder)["leader"] is not None
    client.close()
    fault.heal(target)
    fault.heal(target)  # idempotent


def test_a_holder_on_the_isolated_member_loses_its_lease_to_the_majority_and_its_stale_write_is_accepted(
        services, engines):
    m, verdict = run(services, engines, "etcd", "holder_member")
    evidence = m["evidence"]
    assert evidence["isolated"] == evidence["holder_member"] != evidence["contender_member"]
    assert evidence["isolated_health"]["reason"] == "RAFT NO LEADER"
    assert evidence["relayed_across_partition"] == 0
    assert m["contender"]["acquired"] is True and m["token_increased"] is True
    # Its keep-alive raises on the leaderless member only when a renewal falls due and times out before the
    # heal (the reference, at a 2 s TTL, saw none in 3 of 3); its release() says so every time.
    holder = m["holder"]
    assert holder["noticed_loss_at"] is not None or any(s["via"] == "release()" for s in holder["signals"])
    assert m["holder"]["write"] == "committed" and verdict == "stale write accepted"


def test_across_a_leader_change_the_majoritys_revision_fences_out_the_isolated_leaders_holder(services, engines):
    m, verdict = run(services, engines, "etcd_fenced", "leader")
    evidence = m["evidence"]
    assert evidence["leader_changed"] is True and evidence["leader_before"] == evidence["isolated"]
    assert m["contender"]["acquired"] is True and m["token_increased"] is True
    assert m["holder"]["write"] == "rejected" and verdict == "stale write rejected"


def test_a_killed_leader_does_not_take_the_lease_of_a_holder_on_a_follower(services, engines):
    m, verdict = run(services, engines, "etcd", "leader_kill")
    evidence = m["evidence"]
    assert not psutil.pid_exists(evidence["killed_pid"]) or \
        psutil.Process(evidence["killed_pid"]).status() == psutil.STATUS_ZOMBIE
    assert evidence["term_after"] > evidence["term_before"]
    assert evidence["killed"] not in (evidence["holder_member"], evidence["contender_member"])
    assert m["contender"]["acquired"] is False  # the lease survived: proves nothing
    assert outcome_of(EtcdPartitionScenario(), m, "etcd")["exercised"] is False
    assert verdict == "held"


def test_a_failed_trial_leaves_no_member_and_no_data(services, engines, monkeypatch):
    def refuse(self, target, within=0):
        raise FaultNotConfirmed("planted")

    monkeypatch.setattr(EtcdPartition, "confirm", refuse)
    with pytest.raises(FaultNotConfirmed, match="planted"):
        run(services, engines, "etcd", "holder_member")
    assert no_holder_left()
    assert not left_behind(services)


def test_clusters_started_ahead_spare_the_next_trial_its_start_and_none_is_left(services, engines):
    """In a run the scenario starts each trial's cluster one ahead (trials_scope): the second trial takes a
    cluster that came up during the first, and the one started ahead for a trial that never came is stopped."""
    scenario = EtcdPartitionScenario()
    done = []
    with scenario.trials_scope(services, "quick", 3):  # three planned, two run: one cluster is left over
        for _ in range(2):
            env = trial_env(services, engines, scenario.name, "etcd", "holder_member", scenario.profile_params("quick"))
            done.append(scenario.run_trial(env))
    assert no_holder_left()
    assert not left_behind(services), "a cluster started ahead was left running"
    second = done[1]
    assert second["cluster_wait_s"] < second["cluster_start_s"] / 2, second  # it was up before the trial asked
