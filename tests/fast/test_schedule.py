"""The runner's phases follow each scenario's declared lane: nothing runs beside a Lane.ALONE scenario, and a
scenario on servers of its own runs beside the run's-server ones and holds none of that server's sessions.
run_lanes keeps plan order within a lane, runs the lanes side by side, and an error in one stops them all."""

import threading

import pytest

import backends
import scenarios
from lab.runner import run_lanes, schedule
from lab.pacing import Lane, Pacing


def test_every_scenario_declares_a_known_lane():
    for name in scenarios.names():
        assert isinstance(scenarios.load(name).pacing.lane, Lane), name


def test_alone_scenarios_run_with_nothing_beside_them_and_own_server_ones_beside_the_rest():
    chosen = [scenarios.load(name) for name in scenarios.names()]
    phases = schedule(chosen)
    assert sorted(s.name for phase in phases for lane in phase for s in lane) == sorted(scenarios.names())
    for phase in phases:
        members = [s for lane in phase for s in lane]
        if any(s.pacing.lane is Lane.ALONE for s in members):
            assert len(members) == 1, [s.name for s in members]
    first = phases[0]
    assert all({s.pacing.lane for s in lane} == {Lane.OWN_SERVERS} for lane in first[1:]) and len(first) == 3
    assert Lane.OWN_SERVERS not in {s.pacing.lane for s in first[0]}
    own = [s.name for lane in first[1:] for s in lane]
    assert "failover" in own and "netdrop" in own


def test_a_scenario_on_its_own_servers_asks_nothing_of_the_runs_postgres():
    for name in scenarios.names():
        scenario = scenarios.load(name)
        if scenario.pacing.lane is Lane.OWN_SERVERS:
            for backend in backends.names():
                assert scenario.pg_sessions(backends.load(backend), "default") == 0, (name, backend)


def test_a_run_of_only_alone_scenarios_runs_them_one_by_one():
    chosen = [scenarios.load(n) for n in ("perf", "latency")]
    assert [[[s.name for s in lane] for lane in phase] for phase in schedule(chosen)] == [[["perf"]], [["latency"]]]


class Planned:
    """A stand-in scenario: the scheduler reads only its name and its pacing's lane."""

    def __init__(self, name, lane):
        self.name, self.pacing = name, Pacing(lane=lane)


TWO_LANES = [[Planned("a", Lane.SHARED), Planned("b", Lane.SHARED)],
             [Planned("f", Lane.OWN_SERVERS), Planned("g", Lane.OWN_SERVERS)]]


def names(phases):
    return [[[s.name for s in lane] for lane in phase] for phase in phases]


def test_plan_order_is_kept_within_each_lane_and_alone_ones_come_last_in_plan_order():
    chosen = [Planned("a", Lane.SHARED), Planned("x", Lane.ALONE), Planned("f", Lane.OWN_SERVERS),
              Planned("b", Lane.SHARED), Planned("y", Lane.ALONE), Planned("g", Lane.OWN_SERVERS),
              Planned("c", Lane.SHARED)]
    assert names(schedule(chosen)) == [[["a", "b", "c"], ["f"], ["g"]], [["x"]], [["y"]]]  # two own-server lanes
    assert names(schedule([Planned("f", Lane.OWN_SERVERS)])) == [[["f"]]]
    assert schedule([]) == []


def test_run_lanes_runs_each_lane_in_order_the_lanes_side_by_side():
    ran, stop = [], threading.Event()
    both = threading.Barrier(2, timeout=5)  # each lane's first scenario waits for the other's: side by side

    def run(scenario):
        if scenario.name in ("a", "f"):
            both.wait()
        ran.append(scenario.name)

    run_lanes(TWO_LANES, run, stop)
    assert [n for n in ran if n in "ab"] == ["a", "b"] and [n for n in ran if n in "fg"] == ["f", "g"]
    assert not stop.is_set()


def test_an_error_in_another_lane_stops_every_lane_and_is_raised_on_the_main_thread():
    ran, stop, main_running = [], threading.Event(), threading.Event()

    def run(scenario):
        ran.append(scenario.name)
        if scenario.name == "f":
            assert main_running.wait(5)
            raise RuntimeError("lane broke")
        main_running.set()
        assert stop.wait(5), "the main lane never saw the stop"

    with pytest.raises(RuntimeError, match="lane broke"):
        run_lanes(TWO_LANES, run, stop)
    assert stop.is_set() and sorted(ran) == ["a", "f"]  # neither lane started its next scenario


def test_a_stop_set_before_a_lane_starts_runs_nothing():
    stop = threading.Event()
    stop.set()
    run_lanes([[Planned("a", Lane.SHARED)], [Planned("f", Lane.OWN_SERVERS)]], lambda s: pytest.fail(s.name), stop)
