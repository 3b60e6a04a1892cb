"""The runner's phases follow each scenario's declared lane: nothing runs beside a Lane.ALONE scenario, and a
scenario on servers of its own runs beside the run's-server ones and holds none of that server's sessions.
run_lanes runs each pool's lanes side by side, each taking the pool's next scenario once free, and an error in one
stops them all."""

import threading

import pytest

import backends
import scenarios
from lab.runner import run_lanes, schedule
from lab.runner.lanes import OWN_SERVER_LANES, Pool
from lab.declarations.pacing import Lane, Pacing


def test_every_scenario_declares_a_known_lane():
    for name in scenarios.names():
        assert isinstance(scenarios.load(name).pacing.lane, Lane), name


def test_alone_scenarios_run_with_nothing_beside_them_and_own_server_ones_beside_the_rest():
    chosen = [scenarios.load(name) for name in scenarios.names()]
    phases = schedule(chosen)
    assert sorted(s.name for phase in phases for pool in phase for s in pool.scenarios) == sorted(scenarios.names())
    for phase in phases:
        members = [s for pool in phase for s in pool.scenarios]
        if any(s.pacing.lane is Lane.ALONE for s in members):
            assert len(members) == 1 and phase[0].lanes == 1, [s.name for s in members]
    shared, own = phases[0]
    assert {s.pacing.lane for s in own.scenarios} == {Lane.OWN_SERVERS} and own.lanes == OWN_SERVER_LANES
    assert Lane.OWN_SERVERS not in {s.pacing.lane for s in shared.scenarios} and shared.lanes == 1
    assert "failover" in own.names and "netdrop" in own.names


def test_a_scenario_on_its_own_servers_asks_nothing_of_the_runs_postgres():
    for name in scenarios.names():
        scenario = scenarios.load(name)
        if scenario.pacing.lane is Lane.OWN_SERVERS:
            for backend in backends.names():
                assert scenario.pg_sessions(backends.load(backend), "default") == 0, (name, backend)


def test_a_run_of_only_alone_scenarios_runs_them_one_by_one():
    chosen = [scenarios.load(n) for n in ("perf", "latency")]
    assert names(schedule(chosen)) == [[["perf"]], [["latency"]]]


class Planned:
    """A stand-in scenario: the scheduler reads only its name and its pacing's lane."""

    def __init__(self, name, lane):
        self.name, self.pacing = name, Pacing(lane=lane)


TWO_LANES = [Pool((Planned("a", Lane.SHARED), Planned("b", Lane.SHARED))),
             Pool((Planned("f", Lane.OWN_SERVERS), Planned("g", Lane.OWN_SERVERS)))]


def names(phases):
    return [[pool.names for pool in phase] for phase in phases]


def test_plan_order_is_kept_within_each_pool_without_estimates_and_alone_ones_come_last_in_plan_order():
    chosen = [Planned("a", Lane.SHARED), Planned("x", Lane.ALONE), Planned("f", Lane.OWN_SERVERS),
              Planned("b", Lane.SHARED), Planned("y", Lane.ALONE), Planned("g", Lane.OWN_SERVERS),
              Planned("c", Lane.SHARED)]
    assert names(schedule(chosen)) == [[["a", "b", "c"], ["f", "g"]], [["x"]], [["y"]]]
    assert [pool.lanes for pool in schedule(chosen)[0]] == [1, OWN_SERVER_LANES]
    assert names(schedule([Planned("f", Lane.OWN_SERVERS)])) == [[["f"]]]
    assert schedule([]) == []


def test_a_pool_takes_the_longest_estimate_first_and_plan_order_among_equals():
    chosen = [Planned("a", Lane.SHARED), Planned("b", Lane.SHARED), Planned("c", Lane.SHARED)]
    assert names(schedule(chosen, {"a": 5.0, "b": 50.0, "c": 5.0}, shared_lanes=2)) == [[["b", "a", "c"]]]


def test_a_free_lane_takes_the_pools_next_scenario_so_a_long_one_holds_up_only_its_own_lane():
    """Pool of two lanes, a first: a runs long, and the other lane takes b, c and d meanwhile (a fixed deal would
    have given c to a's lane and waited for it)."""
    ran, stop, a_may_end = [], threading.Event(), threading.Event()
    lanes_of: dict[str, str] = {}

    def run(scenario):
        lanes_of[scenario.name] = threading.current_thread().name
        if scenario.name == "a":
            assert a_may_end.wait(5)
        ran.append(scenario.name)
        if scenario.name == "d":
            a_may_end.set()

    pool = Pool(tuple(Planned(n, Lane.SHARED) for n in "abcd"), lanes=2)
    run_lanes([pool], run, stop)
    assert ran == ["b", "c", "d", "a"]
    assert lanes_of["b"] == lanes_of["c"] == lanes_of["d"] != lanes_of["a"]


def test_a_lane_whose_pool_is_done_takes_another_pools_next_up_to_that_pools_ceiling():
    """Own pool [f] and shared pool [a, b, c] of one lane, ceiling 2: once f is done its lane takes b while a runs,
    and c waits for a lane to come free, as no more than two shared ones may run at once."""
    ran, stop, release_a = [], threading.Event(), threading.Event()
    running, most = [], [0]
    lock = threading.Lock()

    def run(scenario):
        with lock:
            running.append(scenario.name)
            most[0] = max(most[0], sum(1 for n in running if n in "abc"))
        if scenario.name == "a":
            assert release_a.wait(5)
        with lock:
            running.remove(scenario.name)
            ran.append(scenario.name)
        if scenario.name == "c":
            release_a.set()

    shared = Pool(tuple(Planned(n, Lane.SHARED) for n in "abc"), lanes=1, ceiling=2)
    own = Pool((Planned("f", Lane.OWN_SERVERS),), lanes=1)
    run_lanes([shared, own], run, stop)
    assert ran == ["f", "b", "c", "a"] or ran == ["b", "f", "c", "a"]
    assert most[0] == 2  # a beside b, then beside c: never three
    assert not stop.is_set()


def test_laid_out_follows_the_lanes_and_ceilings_as_run_lanes_takes_them():
    from lab.runner.lanes import laid_out

    shared = Pool(tuple(Planned(n, Lane.SHARED) for n in "abc"), lanes=1, ceiling=2)
    own = Pool((Planned("f", Lane.OWN_SERVERS), Planned("g", Lane.OWN_SERVERS)), lanes=2)
    seconds = {"a": 100.0, "b": 30.0, "c": 30.0, "f": 10.0, "g": 50.0}
    # f ends at 10 and its lane takes b beside a (two shared: the ceiling); b ends at 40 and that lane takes c;
    # g's lane, free at 50, finds nothing left. Without the ceiling, the shared lane runs all three.
    assert laid_out([shared, own], seconds) == [["a"], ["f", "b", "c"], ["g"]]
    assert laid_out([Pool(shared.scenarios, lanes=1), own], seconds) == [["a", "b", "c"], ["f"], ["g"]]


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
    run_lanes([Pool((Planned("a", Lane.SHARED),)), Pool((Planned("f", Lane.OWN_SERVERS),))],
              lambda s: pytest.fail(s.name), stop)
