"""Leases under the faults that break them, on real Redis, etcd and PostgreSQL (the post's Why-not-just row)."""

from dataclasses import replace

import pytest

import backends
from lab.faults import FaultNotConfirmed
from scenarios.base import Skip, TrialSpec
from scenarios.cut import Cut
from scenarios.pause import Pause
from scenarios.restart import Restart
from tests.server import planted_backends
from tests.server.helpers import lock_lost, no_holder_left, outcome_of, trial_env

pytestmark = pytest.mark.server


def run(services, engines, scenario, backend):
    variant = scenario.variants[0]
    env = trial_env(services, engines, scenario.name, backend, variant, scenario.profile_params("quick"))
    measures = scenario.run_trial(env)
    assert no_holder_left()
    return measures, outcome_of(scenario, measures, backend)["verdict"]


@pytest.mark.parametrize("backend", ["redis", "etcd", "redlock", "session"])
def test_a_paused_holder_without_fencing_gets_its_stale_write_accepted(services, engines, backend):
    m, verdict = run(services, engines, Pause(), backend)
    assert lock_lost(Pause(), m, backend) and m["contender"]["acquired"] is True
    assert m["holder"]["write"] == "committed" and verdict == "stale write accepted"
    assert m["runs_in_final"] == ["holder"]  # the stale rebuild overwrote the contender's newer one


@pytest.mark.parametrize("backend", ["redis_fenced", "etcd_fenced", "lease_row"])
def test_the_fence_refuses_a_paused_holders_write(services, engines, backend):
    m, verdict = run(services, engines, Pause(), backend)
    assert lock_lost(Pause(), m, backend)
    assert m["holder"]["write"] == "rejected" and "FenceRejected" in m["holder"]["write_error"]
    assert verdict == "stale write rejected"
    assert m["runs_in_final"] == ["contender"] and m["rows_final"] == 250  # rows never mix
    assert m["holder"]["release"].startswith("raised LockLost")  # and the holder is told


def test_a_paused_xact_holder_cannot_commit_after_another_run_took_the_company(services, engines):
    m, verdict = run(services, engines, Pause(), "xact")
    assert m["point"] == "after_delete"
    assert m["contender"]["write"] == "committed"
    assert m["holder"]["write"] == "failed" and verdict == "rolled back"
    assert m["runs_in_final"] == ["contender"]


def test_autocommit_session_lock_holds_through_a_pause(services, engines):
    m, verdict = run(services, engines, Pause(), "session_autocommit")
    assert m["contender"]["acquired"] is False and verdict == "held"


@pytest.mark.parametrize("backend, expected", [("redis", "stale write accepted"), ("etcd_fenced", "stale write rejected"),
                                               ("session_autocommit", "held")])
def test_a_cut_lock_connection(services, engines, backend, expected):
    m, verdict = run(services, engines, Cut(), backend)
    assert verdict == expected, m


@pytest.mark.parametrize("backend, expected", [
    ("redis", "stale write accepted"),
    # Redis without persistence forgets the INCR counter with the lock: the next token starts
    # over at 1 and the fence lets the stale holder through.
    ("redis_fenced", "stale write accepted"),
    ("etcd", "held"),  # etcd keeps the lease across a restart
    ("lease_row", "held"),  # the lease is a row: it survives a PostgreSQL restart
    ("redlock", "stale write accepted"),  # every master restarts without persistence: the quorum forgets the lock
])
def test_a_restarted_lock_server(services, engines, backend, expected):
    run_server = services.embedded.get(backends.load(backend).lock_service)
    pids = list(run_server.pids) if run_server is not None else None
    m, verdict = run(services, engines, Restart(), backend)
    assert verdict == expected, m
    # Every one of these trials restarts a server of its own (a PostgreSQL lock's trial runs whole on one), so the
    # run's server is never restarted and the trial runs beside others.
    assert m["evidence"]["server"] == "the trial's own"
    assert list(run_server.pids) == pids
    assert not Restart().exclusive(TrialSpec("restart", backend, "server_restart", 0), services)


def test_a_restart_of_a_server_the_trials_share_runs_alone(services):
    def spec(backend: str) -> TrialSpec:
        return TrialSpec("restart", backend, "server_restart", 0)

    assert not Restart().exclusive(spec("redlock"), services)  # the trial restarts Redlock masters of its own
    given = replace(services, embedded={}, tmp=None)  # servers the lab did not start: restarted by your command
    assert Restart().exclusive(spec("session"), given) and Restart().exclusive(spec("redis"), given)
    assert not Restart().exclusive(spec("session"), services)


# Issue 13, point 1: a cut proves it carried the lock's connection, or the trial is an error.
@pytest.mark.parametrize("backend", ["session", "xact", "redis", "etcd", "redlock", "lease_row"])
def test_every_cut_carries_its_confirmation(services, engines, backend):
    m, _ = run(services, engines, Cut(), backend)
    evidence = m["evidence"]
    assert evidence["fault"] == "cut" and evidence["connections"] >= 1 and evidence["bytes_before"] > 0
    assert evidence["relayed_during"] == 0
    if backend in ("session", "xact"):
        assert evidence["session_through_proxy"]  # the lock's own PostgreSQL session came through the proxy


def plant(monkeypatch, cls) -> str:
    import backends

    monkeypatch.setitem(backends.REGISTRY.entries, cls.name, f"{cls.__module__}:{cls.__name__}")
    return cls.name


def test_a_cut_that_never_carried_the_lock_is_an_error_not_a_verdict(services, engines, monkeypatch):
    name = plant(monkeypatch, planted_backends.IgnoresTheRoute)
    with pytest.raises(FaultNotConfirmed, match="never carried the lock's connection"):
        run(services, engines, Cut(), name)


def test_a_backend_that_declares_its_lock_unroutable_does_not_run_the_cut(services, engines, monkeypatch):
    name = plant(monkeypatch, planted_backends.DeclaredUnroutable)
    with pytest.raises(Skip, match="cannot be routed through a proxy"):
        run(services, engines, Cut(), name)


# Issue 13, point 3: a fault that never took the lock away is recorded as not exercised.
@pytest.mark.parametrize("scenario, backend, exercised", [
    (Restart(), "etcd", False),  # etcd keeps the lease across a restart: never lost
    (Cut(), "session_autocommit", False),  # the server never noticed the cut: held, not tested
    (Pause(), "redis", True),
])
def test_each_trial_records_whether_its_fault_took_the_lock(services, engines, scenario, backend, exercised):
    m, _ = run(services, engines, scenario, backend)
    assert outcome_of(scenario, m, backend)["exercised"] is exercised  # from the history, by the checkers


# Issue 13, point 2: which Redis configuration keeps the fencing token monotonic across a restart.
def test_an_append_only_redis_keeps_the_fence_counter_across_a_restart(services, engines):
    scenario = Restart()
    env = trial_env(services, engines, "restart", "redis_fenced", "aof_always", scenario.profile_params("quick"))
    m = scenario.run_trial(env)
    assert m["evidence"]["aof_enabled"] == 1 and m["evidence"]["pids_before"] != m["evidence"]["pids_after"]
    assert m["evidence"]["server"] == "the trial's own"
    assert m["contender"]["token"] > m["holder"]["token"]  # the counter came back: the next grant is higher
    assert outcome_of(scenario, m, "redis_fenced")["verdict"] == "stale write rejected"
    from lab.servers.clients import redis_client

    client = redis_client(services.redis_url)
    try:
        assert client.info("persistence")["aof_enabled"] == 0  # later trials meet the default Redis again
    finally:
        client.close()


def test_the_append_only_variant_is_na_for_a_lock_not_in_redis():
    from backends import load

    assert "not in a single Redis" in Restart().variant_skip("aof_always", load("etcd_fenced"))
    assert Restart().variant_skip("aof_always", load("redis_fenced")) is None
