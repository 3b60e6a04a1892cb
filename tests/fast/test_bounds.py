"""The lower bound: a scenario's from what it declares (timers, trials, parallelism, sessions, wall budget), a
finished trial's floor from its waits and its measurement, the run's composed over the lanes, and the end line
and Provenance that show them beside the wall time."""

from dataclasses import replace
import io
import threading
import time

import pytest
from rich.console import Console
from rich.progress import Progress, TextColumn

from lab.declarations.pacing import Exclusive, Lane, Pacing
from lab.report.meta import bound_rows
from lab.runner import pacing
from lab.runner.lanes import SHARED_LANES, composed, laid_out, schedule
from lab.runner.pacing import makespan_floor
from lab.runner.progress import ScenarioProgress
from lab.runner.trials import finished_floor
from scenarios.base import Scenario, TrialEnv, TrialSpec


class Planted(Scenario):
    """A scenario with only declarations: a lease waited out, a hold, three trials, four at once."""

    name = "planted"
    summary = "planted declarations"
    params = {"default": {"ttl_s": 2.0, "hold_s": 0.5, "give_up": 9.0, "trials": 3, "parallel": 4}}

    def run_trial(self, env):
        raise AssertionError("never run")


class Windowed(Planted):
    name = "windowed"

    def wall_budget(self, profile):
        return 30.0


def test_a_trial_floor_is_the_timers_it_sits_through_not_its_ceilings():
    assert pacing.trial_floor(Planted(), "default") == 2.5  # ttl_s + hold_s; give_up is a ceiling


def test_the_declared_bound_shares_the_floors_among_the_trials_at_once():
    # 10 trials of 2.5 s, 4 at once: 25 s of trials over 4 workers
    assert pacing.declared_bound(Planted(), "default", [4] * 10) == pytest.approx(6.25)


def test_the_servers_sessions_can_be_what_bounds_it():
    # 8 sessions for the scenario, 4 a trial: two at once, so 10 trials take at least 5 x 2.5 s
    planted = Planted()
    assert pacing.at_once(planted, "default", [4] * 10, 8) == 2
    assert pacing.declared_bound(planted, "default", [4] * 10, 8) == pytest.approx(12.5)
    # trials needing no session (a Redis lock's) fill the workers the sessions leave: 4 at once
    assert pacing.at_once(planted, "default", [0] * 10, 8) == 4


def test_trials_that_run_alone_add_up_and_the_others_share_the_workers():
    # 2 trials alone (2.5 s each, one after another) and 8 beside each other, 4 at once: 5 + 8 x 2.5 / 4
    alone = [True, True] + [False] * 8
    assert pacing.declared_bound(Planted(), "default", [4] * 10, alone=alone) == pytest.approx(5 + 5)
    assert pacing.lower_bound(Planted(), "default", [1.0, 2.0, 3.0], [4, 4, 4], alone=[True, True, True]) == 6.0
    assert pacing.lower_bound(Planted(), "default", [1.0, 2.0, 3.0], [4, 4, 4]) == 3.0  # none alone: the longest


def test_one_long_trial_bounds_it_whatever_the_parallelism():
    assert makespan_floor([30.0, 1.0, 1.0], [2, 2, 2], at_once=100, sessions=None) == 30.0


def test_a_wall_budget_is_waited_out_at_least_once():
    assert pacing.declared_bound(Windowed(), "default", [2] * 4) == 30.0
    assert pacing.declared_bound(Windowed(), "default", []) == 0.0  # nothing to run: nothing to wait for


def test_a_finished_trial_counts_its_longer_waits_and_its_measurement_but_never_more_than_it_took():
    class Measuring(Planted):
        def measured_seconds(self, measures):
            return measures["seconds"]

    env = TrialEnv(None, None, None, "run", TrialSpec("planted", "none", "default", 0), {})
    env.meter.total = 4.0
    ok = {"status": "ok", "measures": {"seconds": 1.5}, "duration": 9.0}
    assert finished_floor(Measuring(), env, ok, declared=2.5) == 5.5  # waited 4 > declared 2.5, + 1.5 measured
    assert finished_floor(Measuring(), env, {**ok, "duration": 3.0}, declared=2.5) == 3.0
    assert finished_floor(Planted(), env, {"status": "error", "duration": 9.0}, declared=2.5) is None


def test_a_copy_of_the_trial_environment_counts_its_waits_to_the_same_trial():
    """A scenario on servers of its own waits through dataclasses.replace(env, services=...) copies."""
    from dataclasses import replace

    env = TrialEnv(None, None, None, "run", TrialSpec("planted", "none", "default", 0), {})
    replace(env, params={"ttl_s": 1.0}).pause(0.2)
    assert env.waited >= 0.2


def test_waits_on_several_threads_of_one_trial_count_once():
    env = TrialEnv(None, None, None, "run", TrialSpec("planted", "none", "default", 0), {})
    threads = [threading.Thread(target=env.pause, args=(0.3,)) for _ in range(3)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert env.waited <= time.monotonic() - started + 0.01
    assert env.waited >= 0.29


class Laned:
    def __init__(self, name, lane):
        self.name, self.pacing = name, Pacing(lane=lane)


def test_the_runs_bound_puts_the_shared_and_own_server_lanes_side_by_side_and_the_alone_ones_after():
    chosen = [Laned("a", Lane.SHARED), Laned("b", Lane.SHARED), Laned("c", Lane.OWN_SERVERS), Laned("d", Lane.ALONE),
              Laned("e", Lane.ALONE)]
    bounds = {"a": 10.0, "b": 5.0, "c": 20.0, "d": 3.0, "e": 4.0}
    assert composed(schedule(chosen), bounds) == 20.0 + 3.0 + 4.0  # own lane (20) outlasts a + b (15)
    assert composed(schedule(chosen), {**bounds, "c": 1.0}) == 15.0 + 3.0 + 4.0
    assert composed(schedule(chosen), {"d": 3.0}) == 3.0  # a scenario not run counts nothing


def test_scenarios_on_servers_of_their_own_run_in_two_lanes_beside_the_shared_one():
    chosen = [Laned("a", Lane.SHARED), Laned("c", Lane.OWN_SERVERS), Laned("f", Lane.OWN_SERVERS),
              Laned("g", Lane.OWN_SERVERS)]
    shared, own = schedule(chosen)[0]
    assert shared.names == ["a"] and own.names == ["c", "f", "g"] and own.lanes == 2
    # c and f start side by side, and g goes to the lane free first (c's): c + g outlast f and a.
    assert laid_out([own], {"c": 10.0, "f": 12.0, "g": 10.0}) == [["c", "g"], ["f"]]
    # With its pool empty at 5, a's lane takes g (the own-server pool may run in any free lane): 5 + 10.
    assert composed(schedule(chosen), {"a": 5.0, "c": 10.0, "f": 12.0, "g": 10.0}) == 15.0
    # By their estimates, the longest first: f (30) alone, c and g (10 + 12) beside it.
    _, own = schedule(chosen, {"c": 10.0, "f": 30.0, "g": 12.0})[0]
    assert own.names == ["f", "g", "c"] and laid_out([own], {"c": 10.0, "f": 30.0, "g": 12.0}) == [["f"], ["g", "c"]]


def test_the_end_line_says_wall_over_bound():
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    shown = ScenarioProgress(console, Progress(TextColumn(""), console=console, disable=True), "pause", 1)
    shown.advance({"status": "ok", "safety": "safe"})
    shown.started -= 10.0
    shown.finish(4.0, stolen=0.18)
    line = out.getvalue().splitlines()[-1]
    assert "; wall / bound 2.5" in line and line.endswith(" s / 4.0 s); 18% of the CPU taken by the host")


def test_provenance_shows_the_bounds_a_run_recorded_and_nothing_for_one_without():
    meta = {"scenario_order": ["pause", "perf"],
            "bounds": {"rule": "the rule", "run": {"wall_s": 90.0, "bound_s": 60.0},
                       "scenarios": {"perf": {"wall_s": 30.0, "bound_s": 20.0, "lane": "alone", "trials_finished": 8,
                                              "at_once": 1},
                                     "pause": {"wall_s": 60.0, "bound_s": 40.0, "lane": "shared",
                                               "trials_finished": 78, "at_once": 12}}}}
    rows = bound_rows(meta)
    assert rows[0] == ["time: lower bound", "the rule"]
    assert rows[1] == ["time: the run", "wall 90 s, bound 60 s (1.50x)"]
    assert [r[0] for r in rows[2:]] == ["time: pause", "time: perf"]
    assert rows[2][1].startswith("wall 60 s, bound 40 s (1.50x); shared lane, 78 trials, up to 12 at once")
    assert bound_rows({}) == []
    meta["bounds"]["scenarios"]["pause"].update(events=21, subjects=756, trials_finished=21, at_once=3)
    assert "shared lane, 21 events of 756 trials, up to 3 at once" in bound_rows(meta)[2][1]


def test_a_wait_on_a_fault_or_a_contenders_patience_counts_in_the_floor_once_beside_a_pause():
    """env.waiting(): a restart being confirmed, a contender trying for its patience; overlapping a pause on
    another thread of the same trial, the two count once."""
    env = TrialEnv(None, None, None, "run", TrialSpec("planted", "none", "default", 0), {})
    started = time.monotonic()
    other = threading.Thread(target=env.pause, args=(0.2,))
    with env.waiting():
        other.start()
        threading.Event().wait(0.3)  # the wait itself: what a fault's confirm or a contender's patience takes
    other.join()
    assert 0.29 <= env.waited <= time.monotonic() - started + 0.01


def test_the_runs_server_scenarios_are_dealt_into_the_lanes_the_run_allows():
    chosen = [Laned("a", Lane.SHARED), Laned("b", Lane.SHARED), Laned("h", Lane.SHARED), Laned("c", Lane.OWN_SERVERS)]
    assert [(pool.names, pool.lanes) for pool in schedule(chosen)[0]] == [(["a", "b", "h"], 1), (["c"], 2)]
    shared, own = schedule(chosen, {"a": 30.0, "b": 10.0, "h": 12.0}, shared_lanes=2)[0]
    assert shared.names == ["a", "h", "b"] and laid_out([shared], {"a": 30.0, "b": 10.0, "h": 12.0}) == [["a"], ["h", "b"]]
    assert composed([[shared, own]], {"a": 30.0, "b": 10.0, "h": 12.0, "c": 5.0}) == 30.0


class Restarting(Laned):
    """A run's-server scenario whose trials restart the server they are handed unless it is one of their own."""

    def __init__(self, name, given_server: bool):
        super().__init__(name, Lane.SHARED)
        self.pacing = Pacing(lane=Lane.SHARED, exclusive=Exclusive.PER_TRIAL)
        self.given_server = given_server

    def exclusive(self, spec, services) -> bool:
        return self.given_server


def test_the_runs_server_scenarios_share_one_lane_where_one_would_reach_the_others():
    from lab.runner.run import shared_lanes
    from lab.runner.waves import Wave

    spec = TrialSpec("r", "redis", "server_restart", 0)
    mine, given = Restarting("r", given_server=False), Restarting("r", given_server=True)
    assert shared_lanes([Laned("a", Lane.SHARED), mine], {"r": [spec]}, None, {}) == SHARED_LANES
    assert shared_lanes([Laned("a", Lane.SHARED), given], {"r": [spec]}, None, {}) == 1  # it restarts yours
    assert shared_lanes([Laned("a", Lane.SHARED), given], {"r": [replace(spec, skip="n/a")]}, None, {}) == SHARED_LANES

    def wave(name, sessions):
        return Wave(name, 10, 4, 100, sessions, 1)

    assert shared_lanes([Laned("a", Lane.SHARED), mine], {}, None, {"a": wave("a", 50), "r": wave("r", 50)}) == 2
    assert shared_lanes([Laned("a", Lane.SHARED), mine], {}, None, {"a": wave("a", 60), "r": wave("r", 50)}) == 1


def test_the_runs_server_scenarios_take_free_lanes_only_while_their_sessions_fit_together():
    from lab.runner.lanes import OWN_SERVER_LANES
    from lab.runner.run import shared_ceiling
    from lab.runner.waves import Wave

    def wave(name, sessions):
        return Wave(name, 10, 4, 100, sessions, 1)

    chosen = [Laned(n, Lane.SHARED) for n in "abcd"] + [Laned("f", Lane.OWN_SERVERS)]
    small = {n: wave(n, 20) for n in "abcd"}
    assert shared_ceiling(chosen, 2, small) == 2 + OWN_SERVER_LANES  # 4 x 20 fit 100
    assert shared_ceiling(chosen, 2, {**small, "a": wave("a", 50), "b": wave("b", 31)}) == 2  # 50 + 31 + 20 > 100
    assert shared_ceiling(chosen, 2, {**small, "a": wave("a", 50)}) == 3  # 50 + 20 + 20 fit, a fourth does not
    assert shared_ceiling(chosen, 1, small) == 1  # one lane: a trial of theirs reaches the others' server
