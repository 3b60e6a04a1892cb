"""Which server is the primary (or the leader), read over the servers' own protocols: what confirms a user's failover
command on PostgreSQL and etcd as on Redis (lab/servers/identity.py), on a real primary and standby and a real
three-member etcd, failed over for real."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from lab.servers.etcd.cluster import EtcdCluster
from lab.servers.identity import is_new_primary, old_primary_answer, primary_identity
from lab.servers.postgres.pair import PostgresPair

pytestmark = pytest.mark.server


def until(check, within: float = 30.0):
    deadline = time.monotonic() + within
    while True:
        try:
            found = check()
            if found:
                return found
        except Exception:  # between primaries nothing may answer
            pass
        assert time.monotonic() < deadline, "not within the bound"
        time.sleep(0.1)


def test_a_postgresql_failover_is_a_new_node_taking_writes_on_a_later_timeline(services):
    root = Path(tempfile.mkdtemp(prefix="identity-", dir=services.tmp))
    root.chmod(0o755)
    pair = PostgresPair(root, services.embedded["postgres"].bin)
    try:
        pair.start()
        cluster = replace(services, pg_url=pair.url, embedded={}, tmp=None)
        before = primary_identity(cluster, "postgres")
        assert before["address"] == f"127.0.0.1:{pair.primary.port}" and before["in_recovery"] is False
        assert not is_new_primary(before, primary_identity(cluster, "postgres"), "postgres")
        pair.fail_over()
        after = until(lambda: (a := primary_identity(cluster, "postgres")) and is_new_primary(before, a, "postgres")
                      and a)
        assert after["address"] == f"127.0.0.1:{pair.standby.port}" and after["timeline"] > before["timeline"]
        with pytest.raises(Exception):  # the old primary crashed: nothing answers at its address
            old_primary_answer(cluster, "postgres", before)
        standby = {"address": f"127.0.0.1:{pair.standby.port}"}
        assert old_primary_answer(cluster, "postgres", standby) == {"in_recovery": False,
                                                                     "timeline": after["timeline"]}
    finally:
        pair.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_an_etcd_leader_change_is_a_new_leader_id(services):
    root = Path(tempfile.mkdtemp(prefix="identity-etcd-", dir=services.tmp))
    cluster = EtcdCluster(root)
    try:
        cluster.start()
        follower = cluster.followers()[0]
        served = replace(services, etcd_endpoint=follower.endpoint, embedded={}, tmp=None)
        before = primary_identity(served, "etcd")
        leader = cluster.wait_leader()
        assert before["leader"] == str(leader.id) and len(before["members"]) == 3
        assert old_primary_answer(served, "etcd", before)["leader"] == before["leader"]
        cluster.kill(leader)
        after = until(lambda: (a := primary_identity(served, "etcd")) and is_new_primary(before, a, "etcd") and a)
        assert after["leader"] != before["leader"] and after["raft_term"] > before["raft_term"]
        with pytest.raises(Exception):  # killed: its client URL does not answer
            old_primary_answer(served, "etcd", before)
        cluster.restart(leader)
        assert until(lambda: old_primary_answer(served, "etcd", before)["leader"] == after["leader"])
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
