"""is_new_primary on etcd: a cluster mid election (no leader yet) is not a failover that happened."""
from lab.servers.identity import is_new_primary

BEFORE = {"leader": "5288592685581827171", "raft_term": 2, "members": {}}


def test_no_leader_mid_election_is_not_a_new_leader():
    assert not is_new_primary(BEFORE, {"leader": None, "raft_term": 2, "members": {}}, "etcd")


def test_the_same_leader_is_not_a_new_leader():
    assert not is_new_primary(BEFORE, dict(BEFORE, raft_term=3), "etcd")


def test_another_leader_in_a_later_term_is_a_new_leader():
    assert is_new_primary(BEFORE, {"leader": "17", "raft_term": 3, "members": {}}, "etcd")


def test_another_leader_named_before_its_term_is_seen_is_not_yet_a_new_leader():
    assert not is_new_primary(BEFORE, {"leader": "17", "raft_term": 2, "members": {}}, "etcd")
