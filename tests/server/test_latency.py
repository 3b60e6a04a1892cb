"""The latency scenario on real servers: every figure present, a positive floor, round trips counted, and
each backend beside the bare library call it wraps."""

import pytest
from sqlalchemy import text

from scenarios.latency import BARE_BLOCKS, BARE_GOAL, Latency, _throughput_configs, meets_goal
from tests.server.helpers import trial_env, wait_session_gone

pytestmark = pytest.mark.server

FIGURES = ("acquire_release", "acquire", "release", "handoff")


def run(services, engines, backend):
    scenario = Latency()
    params = {**scenario.profile_params("quick"), "iterations": 10, "handoffs": 5, "window_s": 0.1}
    measures = scenario.run_trial(trial_env(services, engines, "latency", backend, "default", params))
    return measures, scenario.verdict(measures)


@pytest.mark.parametrize("backend, service, floor", [("session_autocommit", "postgres", "select 1"),
                                                     ("redis", "redis", "PING (redis-py)")])
def test_a_quick_trial_returns_every_figure_beside_a_positive_floor(services, engines, backend, service, floor):
    m, verdict = run(services, engines, backend)
    assert verdict.startswith("measured: ") and f"{m['ratio']:.2f}x" in verdict, m
    assert m["lock_service"] == service and m["floor"] == floor
    for name in FIGURES:
        assert m[name]["n"] > 0 and 0 < m[name]["p50"] <= m[name]["p99"] <= m[name]["max"], (name, m[name])
    assert m["floors"][floor]["p50"] > 0
    assert m["ratio"] == round(m["acquire_release"]["p50"] / m["floors"][floor]["p50"], 2)
    assert [(t["workers"], t["keys"]) for t in m["throughput"]] == _throughput_configs()
    assert all(t["grants_per_s"] > 0 for t in m["throughput"])
    # One worker alone is never refused; eight on one key are refused while another holds it.
    assert m["throughput"][0]["refused"] == 0


@pytest.mark.parametrize("backend", ["session_autocommit", "redis"])
def test_round_trips_are_counted_not_assumed(services, engines, backend):
    m, _ = run(services, engines, backend)
    counted = m["round_trips"]
    assert counted["acquire"] >= 1 and counted["release"] >= 1, counted
    if backend == "redis":
        # redis-py's Lock: SET NX PX to take it, one EVALSHA (a GET and a DEL inside) to give it back.
        assert counted["server_commands_per_pair"]["set"] == 1, counted
        assert counted["server_commands_per_pair"]["evalsha"] == 1, counted


def test_lease_row_round_trips_and_commit_floor_are_measured(services, engines):
    m, _ = run(services, engines, "lease_row")
    assert m["round_trips"]["acquire"] >= 1 and m["floors"]["one-row commit"]["p50"] > 0


def test_a_lease_taken_again_by_the_same_instance_is_still_renewed(services, engines):
    """A release's stop flag must not end the next grant's keep-alive (it did: one flag per instance)."""
    env = trial_env(services, engines, "latency", "lease_row", "default", {})
    backend = env.backend(options={"ttl_s": 0.6})
    try:
        assert backend.acquire()
        backend.release()
        assert backend.acquire()
        env.pause(1.5)  # two and a half TTLs: without renewal the lease has lapsed
        assert backend.held()
        backend.release()
    finally:
        backend.close()


@pytest.mark.parametrize("backend", ["session_autocommit", "redis"])
def test_each_backend_is_timed_against_its_bare_library_call_in_the_same_trial(services, engines, backend):
    m, _ = run(services, engines, backend)
    bare = m["bare"]
    assert bare is not None, "both declare the library call they wrap"
    assert bare["acquire_release"]["n"] == m["acquire_release"]["n"] == m["iterations"]  # one of each per iteration
    assert 0 < bare["acquire_release"]["p50"] <= bare["acquire_release"]["p99"]
    assert bare["ratio_to_bare"] == round(m["acquire_release"]["p50"] / bare["acquire_release"]["p50"], 3)
    # One ratio per block, and never more blocks than pairs: the precision rule may stop after three.
    assert len(bare["block_ratios"]) == min(BARE_BLOCKS, m["iterations"]), (m["iterations"], bare["block_ratios"])
    assert all(r > 0 for r in bare["block_ratios"])
    assert bare["goal"] == BARE_GOAL
    assert bare["meets_goal"] == meets_goal(bare["ratio_to_bare"], bare["block_ratios"], BARE_GOAL)
    # The bare call's round trips, through the same counting proxy: the library's own, and never more
    # than the backend's (the backend sends at least what it wraps).
    counted = bare["round_trips"]
    assert counted["pairs"] == m["round_trips"]["pairs"]
    assert 1 <= counted["acquire"] <= m["round_trips"]["acquire"], (counted, m["round_trips"])
    assert 1 <= counted["release"] <= m["round_trips"]["release"], (counted, m["round_trips"])
    assert "bare" not in m["round_trips"]
    if backend == "redis":  # redis-py's Lock alone: SET NX PX, then one EVALSHA
        assert counted["server_commands_per_pair"]["set"] == 1, counted
        assert counted["server_commands_per_pair"]["evalsha"] == 1, counted
    else:  # one statement each way on an AUTOCOMMIT connection: nothing to begin or commit
        assert (counted["acquire"], counted["release"]) == (1, 1), counted


def test_lease_row_sends_one_statement_per_acquire_and_release_like_its_bare_sql(services, engines):
    """pool_pre_ping cost a `select 1` before each: 2 + 2 round trips where its bare SQL needs 1 + 1."""
    m, _ = run(services, engines, "lease_row")
    assert (m["round_trips"]["acquire"], m["round_trips"]["release"]) == (1, 1), m["round_trips"]
    assert (m["bare"]["round_trips"]["acquire"], m["bare"]["round_trips"]["release"]) == (1, 1), m["bare"]


def test_a_lease_row_whose_pooled_session_was_terminated_reconnects_without_a_failed_call(services, engines):
    """With no ping before each statement, a connection the server closed must still never reach a statement."""
    env = trial_env(services, engines, "latency", "lease_row", "default", {})
    backend = env.backend()
    monitor, _ = engines
    try:
        assert backend.acquire()
        backend.release()
        pooled = [backend._engine.connect() for _ in range(2)]  # every session its pool keeps (pool_size 2)
        pids = [conn.execute(text("select pg_backend_pid()")).scalar() for conn in pooled]
        for conn in pooled:
            conn.close()
        with monitor.connect() as conn:
            for pid in pids:
                assert conn.execute(text("select pg_terminate_backend(:p)"), {"p": pid}).scalar()
        for pid in pids:
            wait_session_gone(monitor, pid)
        assert backend.acquire(), "a terminated pooled session must be replaced, not used"
        assert backend.held()
        backend.release()
    finally:
        backend.close()



def _run_locks() -> list[str]:
    """Every registered backend the latency scenario times (a run-level lock)."""
    import backends

    return [name for name in backends.names() if Latency().applies_to(backends.load(name)) is None]


@pytest.mark.parametrize("backend", _run_locks())
def test_a_declared_bare_call_does_the_backends_own_lock_work(services, engines, backend):
    """The bare call takes the very lock the backend takes: while it holds the key the backend is refused,
    and once it has released, the backend gets in. A bare call that locked something else (or nothing)
    would make the ratio meaningless."""
    import backends

    cls = backends.load(backend)
    if (reason := cls.cannot_run(services)) is not None:
        pytest.skip(reason)
    env = trial_env(services, engines, "latency", backend, "default", {})
    key = env.key("same-work")
    instance = env.backend(key=key)
    bare = instance.bare_call(key)
    if bare is None:
        instance.close()
        pytest.skip(f"{backend} declares no bare call")
    try:
        assert bare.call
        assert bare.acquire(), "an uncontended bare acquire was refused"
        assert not instance.acquire(), "the backend got the key its bare call holds: they lock different things"
        bare.release()
        assert instance.acquire(), "the bare release did not free the backend's key"
        instance.release()
    finally:
        instance.close()
        bare.close()
