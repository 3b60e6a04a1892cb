"""The latency section's "vs bare library call" column, from handcrafted trials: a verdict only where the
recorded spread supports it, "no bare call declared" for a backend that names none."""

import copy

from lab.report import render
from lab.report.latency import NO_BARE, NOT_MEASURED, versus_bare
from scenarios.latency import BARE_GOAL, meets_goal
from tests.fast.test_report import META


def figure(p50: float) -> dict:
    return {"p50": p50, "p99": p50 * 2, "max": p50 * 3, "n": 30}


def bare(ratio: float, blocks: list[float], meets, round_trips=(1, 1)) -> dict:
    return {"call": "redis-py Lock.acquire(); Lock.release()", "acquire_release": figure(0.0003),
            "acquire": figure(0.0002), "release": figure(0.0001), "ratio_to_bare": ratio, "block_ratios": blocks,
            "goal": BARE_GOAL, "meets_goal": meets,
            "round_trips": {"acquire": round_trips[0], "release": round_trips[1], "pairs": 10}}


def latency_trial(backend: str, versus: dict | None, index: int = 0) -> dict:
    measures = {"lock_service": "redis", "iterations": 30, "cold_acquire_s": 0.002,
                "acquire_release": figure(0.00035), "acquire": figure(0.0002), "release": figure(0.00015),
                "floors": {"PING (redis-py)": figure(0.0001)}, "floor": "PING (redis-py)", "ratio": 3.5,
                "handoff": figure(0.0005), "handoff_tries": figure(3), "handoffs_failed": 0,
                "waiter_not_kept_out": 0, "waits": "a thread polling", "throughput": [],
                "round_trips": {"acquire": 2, "release": 1, "pairs": 10}, "bare": versus}
    return {"id": f"latency/{backend}/default/{index}", "scenario": "latency", "backend": backend,
            "variant": "default", "index": index, "status": "ok", "measures": measures, "verdict": "measured"}


def row(text: str, backend: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {backend} | redis |"))


def test_the_column_says_meets_misses_or_no_verdict_as_the_blocks_allow():
    assert versus_bare({"bare": bare(1.05, [1.0, 1.1, 1.02, 1.08, 1.04], True)}) == "1.05 (meets <= 1.2)"
    assert versus_bare({"bare": bare(1.6, [1.5, 1.7, 1.4, 1.65, 1.55], False)}) == "1.60 (misses <= 1.2)"
    assert versus_bare({"bare": bare(1.15, [1.0, 1.3, 1.1, 1.12, 1.05], None)}) == \
        "1.15 (within noise: blocks 1.00-1.30, no verdict)"
    assert versus_bare({"bare": None}) == NO_BARE
    assert versus_bare({}) == NOT_MEASURED


def test_a_recorded_verdict_its_own_blocks_contradict_is_not_printed():
    """Planted: the record says it meets the goal, but one block's ratio is above it."""
    cell = versus_bare({"bare": bare(1.1, [1.0, 1.05, 1.35, 1.1, 1.02], True)})
    assert "meets" not in cell and "no verdict" in cell
    cell = versus_bare({"bare": bare(1.3, [1.25, 1.4, 1.1, 1.3, 1.5], False)})
    assert "misses" not in cell and "no verdict" in cell


def test_the_scenario_gives_a_verdict_only_outside_the_spread():
    goal = BARE_GOAL
    assert meets_goal(1.05, [1.0, 1.1, 1.02, 1.08, 1.04], goal) is True
    assert meets_goal(1.6, [1.5, 1.7, 1.4, 1.65, 1.55], goal) is False
    assert meets_goal(1.1, [1.0, 1.05, 1.35, 1.1, 1.02], goal) is None  # one block above: no verdict
    assert meets_goal(1.25, [1.3, 1.1, 1.3, 1.3, 1.3], goal) is None  # one block below: no verdict
    assert meets_goal(1.1, [], goal) is None


def test_the_section_states_the_goal_and_renders_the_column_and_the_bare_calls():
    trials = [latency_trial("redis", bare(1.05, [1.0, 1.1, 1.02, 1.08, 1.04], True)),
              latency_trial("my_plugin", None)]
    text = render(META, trials, "run-1")
    assert "| vs bare library call |" in text
    assert "Goal: a lab backend adds no round trip of its own to the library call it wraps" in text
    assert "at most 1.2 times the bare call's, measured in the same run" in text
    assert "1.05 (meets <= 1.2)" in row(text, "redis")
    assert "2 + 1; bare: 1 + 1" in row(text, "redis")
    assert NO_BARE in row(text, "my_plugin") and "bare:" not in row(text, "my_plugin")
    assert "- redis: redis-py Lock.acquire(); Lock.release(), " in text


def test_a_run_that_predates_the_bare_call_renders_without_it():
    old = latency_trial("redis", None)
    del old["measures"]["bare"]
    text = render(META, [old], "run-1")
    assert NOT_MEASURED in row(text, "redis")
    assert "the run predates that measurement" in text
    assert "Goal:" not in text


def test_rendering_the_column_is_deterministic():
    trials = [latency_trial("redis", bare(1.15, [1.0, 1.3, 1.1, 1.12, 1.05], None))]
    assert render(META, trials, "r") == render(META, copy.deepcopy(trials), "r")
