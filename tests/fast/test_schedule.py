"""The runner's phases follow each scenario's declared lane: nothing runs beside an ALONE scenario, and a
scenario on servers of its own runs beside the run's-server ones and holds none of that server's sessions."""

import backends
import scenarios
from lab.runner import schedule
from scenarios.base import ALONE, LANES, OWN_SERVERS


def test_every_scenario_declares_a_known_lane():
    for name in scenarios.names():
        assert scenarios.load(name).lane in LANES, name


def test_alone_scenarios_run_with_nothing_beside_them_and_own_server_ones_beside_the_rest():
    chosen = [scenarios.load(name) for name in scenarios.names()]
    phases = schedule(chosen)
    assert sorted(s.name for phase in phases for lane in phase for s in lane) == sorted(scenarios.names())
    for phase in phases:
        members = [s for lane in phase for s in lane]
        if any(s.lane == ALONE for s in members):
            assert len(members) == 1, [s.name for s in members]
    first = phases[0]
    assert {s.lane for s in first[1]} == {OWN_SERVERS} and OWN_SERVERS not in {s.lane for s in first[0]}
    own = [s.name for s in first[1]]
    assert "failover" in own and "netdrop" in own


def test_a_scenario_on_its_own_servers_asks_nothing_of_the_runs_postgres():
    for name in scenarios.names():
        scenario = scenarios.load(name)
        if scenario.lane == OWN_SERVERS:
            for backend in backends.names():
                assert scenario.pg_sessions(backends.load(backend), "default") == 0, (name, backend)


def test_a_run_of_only_alone_scenarios_runs_them_one_by_one():
    chosen = [scenarios.load(n) for n in ("perf", "latency")]
    assert [[[s.name for s in lane] for lane in phase] for phase in schedule(chosen)] == [[["perf"]], [["latency"]]]
