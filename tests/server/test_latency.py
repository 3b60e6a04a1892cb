"""The latency scenario on real servers: every figure present, a positive floor, round trips counted."""

import pytest

from scenarios.latency import Latency, _throughput_configs
from tests.server.helpers import trial_env

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
    assert verdict == "measured", m
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
