"""The stack description (lab/stack/description.py): a typed document that reads back as it was written, unknowns and all, and
refuses what it cannot be with one line naming the field; and the traits columns depend on, read off it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.errors import LabError
from lab.stack.exposure import NO, OFF, ON, YES, Happens, Trait, When, happens, read_trait, when
from lab.stack.description import (SCHEMA, Appendfsync, Client, Etcd, Guard, Patroni, PoolMode, Postgres, Redis, Redlock,
                       Replication, Sentinel, Stack, Unknown, Watchdog, ZooKeeper)

unknown = st.builds(Unknown, st.text(min_size=1, max_size=20))


def fact(values):
    return st.one_of(values, unknown)


words = st.text(max_size=12)
counts = st.integers(min_value=0, max_value=9)
guards = fact(st.builds(Guard, st.integers(0, 10**7), words, st.lists(words, max_size=2).map(tuple)))
patronis = st.builds(Patroni, fact(words), fact(counts), fact(st.booleans()), fact(st.booleans()),
                     fact(st.booleans()), fact(st.sampled_from(Watchdog)), fact(counts), fact(counts), fact(counts),
                     fact(counts))
postgres = st.builds(Postgres, fact(words), guards, guards, fact(st.sampled_from(PoolMode)),
                     st.one_of(st.none(), words, unknown), fact(st.sampled_from(Replication)),
                     st.one_of(st.none(), patronis, unknown))
sentinels = st.builds(Sentinel, fact(counts), fact(counts), fact(words))
redis = st.builds(Redis, fact(words), fact(st.sampled_from(Appendfsync)), fact(st.booleans()), fact(counts),
                  fact(counts), st.one_of(st.none(), sentinels, unknown))
stacks = st.builds(
    Stack, st.one_of(st.none(), postgres), st.one_of(st.none(), redis),
    st.one_of(st.none(), st.builds(Redlock, counts, fact(st.sampled_from(Appendfsync)))),
    st.one_of(st.none(), st.builds(Etcd, fact(words), fact(counts))),
    st.one_of(st.none(), st.builds(ZooKeeper, fact(words), fact(st.booleans()), fact(counts))),
    st.builds(Client, fact(words), fact(st.booleans()), fact(words)), st.one_of(st.none(), words, unknown))


@settings(max_examples=200, deadline=None)
@given(stacks)
def test_every_stack_reads_back_as_written_through_json(stack):
    text = json.dumps(stack.to_json())
    assert Stack.from_json(json.loads(text)) == stack
    assert all(name and why for name, why in stack.unknowns())


def plain_postgres(**changes) -> Postgres:
    base = dict(version="18.6", idle_in_transaction_session_timeout=Guard(0, "default"),
                idle_session_timeout=Guard(0, "default"), pooler=PoolMode.NONE, pooler_kind=None,
                replication=Replication.NONE, ha=None)
    return Postgres(**{**base, **changes})


def test_an_unknown_is_written_with_its_reason_and_never_as_a_value():
    stack = Stack(postgres=plain_postgres(ha=Unknown("no --patroni-url given")))
    document = stack.to_json()
    assert document["schema"] == SCHEMA and document["postgres"]["ha"] == {"unknown": "no --patroni-url given"}
    assert ("postgres.ha", "no --patroni-url given") in stack.unknowns()
    assert document["redis"] is None and document["lock"] == {"unknown": stack.lock.why}


@pytest.mark.parametrize("change, words", [
    (lambda d: d.update(schema=2), "schema 2"),
    (lambda d: d["postgres"].update(pooler="transactoin"), "stack.postgres.pooler: 'transactoin' is not one of"),
    (lambda d: d["postgres"].update(colour="red"), "stack.postgres: no field 'colour'"),
    (lambda d: d["postgres"].pop("replication"), "stack.postgres: missing field 'replication'"),
    (lambda d: d["postgres"]["idle_session_timeout"].update(ms="5s"), "idle_session_timeout.ms: expected a whole"),
])
def test_a_wrong_document_is_refused_in_one_line_naming_the_field(change, words):
    document = Stack(postgres=plain_postgres()).to_json()
    change(document)
    with pytest.raises(LabError) as refused:
        Stack.from_json(document)
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_a_stack_file_that_is_not_json_is_one_line(tmp_path):
    path = tmp_path / "stack.json"
    path.write_text("{not json")
    with pytest.raises(LabError, match="is not JSON"):
        Stack.load(path)
    with pytest.raises(LabError, match="cannot read the stack description"):
        Stack.load(tmp_path / "missing.json")


def test_traits_read_off_the_stack_and_an_unknown_fact_stays_unknown():
    patroni = Patroni("4.1.5", 2, False, False, True, Unknown("not reported"), 20, 1, 5, 1048576)
    stack = Stack(postgres=plain_postgres(replication=Replication.ASYNC, ha=patroni,
                                          idle_in_transaction_session_timeout=Guard(0, "default", ("role app: 5s",))),
                  redis=Redis("6.2", Appendfsync.ALWAYS, False, 1, 0, None))
    assert read_trait(stack, Trait.HA_MANAGER) == "patroni"
    assert read_trait(stack, Trait.SYNCHRONOUS_MODE) == OFF and read_trait(stack, Trait.FAILSAFE_MODE) == ON
    assert isinstance(read_trait(stack, Trait.WATCHDOG), Unknown)
    assert isinstance(read_trait(stack, Trait.IDLE_IN_TRANSACTION_GUARD), Unknown)  # set for another role
    assert read_trait(stack, Trait.REDIS_REPLICAS) == YES and read_trait(stack, Trait.REDIS_SENTINEL) == NO
    assert read_trait(stack, Trait.ETCD_CLUSTER) is None  # no etcd in this stack


def test_a_condition_counts_only_for_a_lock_on_its_service_and_strikes_rule_out_the_rest():
    stack = Stack(postgres=plain_postgres(), redis=Redis("6.2", Appendfsync.ALWAYS, False, 0, 0, None))
    restart = (when(Trait.REDIS_APPENDFSYNC, "off", "no", "everysec"),)
    assert happens(restart, stack, frozenset({"postgres"})).happens is Happens.YES  # PostgreSQL restarts anyway
    assert happens(restart, stack, frozenset({"redis", "postgres"})).happens is Happens.NO  # its Redis fsyncs always
    partition = (when(Trait.ZOOKEEPER_ENSEMBLE, YES),)
    assert happens(partition, stack, frozenset({"postgres"}), strikes=("zookeeper",)).happens is Happens.NO
    # A lock on a service the description leaves out: possible, and said why.
    answer = happens(partition, stack, frozenset({"zookeeper", "postgres"}), strikes=("zookeeper",))
    assert answer.happens is Happens.UNKNOWN and "does not describe its zookeeper" in answer.unknown[0][1]
    assert happens(None, stack, frozenset({"postgres"})).declared is False


def test_a_condition_names_only_values_its_trait_takes():
    with pytest.raises(ValueError, match="takes none, session, transaction"):
        When(Trait.POOLER, ("statement",))
