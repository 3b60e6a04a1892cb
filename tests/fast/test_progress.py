"""Progress without a terminal: a start line with the estimate, an end line with counts; and the estimate itself."""

import io

from rich.console import Console
from rich.progress import Progress, TextColumn

import scenarios
from lab.runner import pacing
from lab.runner.progress import ScenarioProgress


def plain_progress(total, estimate, at_once=1):
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    progress = Progress(TextColumn("{task.fields[left]}"), console=console, disable=True)
    return out, ScenarioProgress(console, progress, "pause", total, estimate, at_once)


def test_a_scenario_starts_with_its_estimate_and_ends_with_its_counts():
    out, shown = plain_progress(2, 75.0)
    shown.advance({"status": "ok", "safety": "unsafe"})
    shown.advance({"status": "error"})
    shown.finish()
    lines = out.getvalue().splitlines()
    assert lines[0] == "pause: 2 trials, about 75 s"
    assert lines[-1].startswith("pause: done in ") and lines[-1].endswith("2 trials (error 1, unsafe 1)")


def test_time_left_is_the_estimate_until_a_round_of_trials_finished_then_their_pace():
    _, shown = plain_progress(10, 100.0, at_once=2)
    assert shown._left(30.0) == "~70 s left"
    shown.done = 2  # the first round took 30 s for 2 trials: 8 more at that pace
    assert shown._left(30.0) == "~2 min left"


def test_past_its_estimate_a_scenario_says_so_and_never_zero_seconds_left():
    """Issue 57: two minutes of "~0 s left" while two trials stalled."""
    _, shown = plain_progress(6, 1.0, at_once=6)
    shown.done = 5
    assert shown._left(0.5) == "~1 s left"  # within its estimate: never less than a second
    left = shown._left(30.0)
    assert "~0 s" not in left and left == "29 s past its ~1 s estimate, 1 trial still to finish"
    shown.done = 6
    assert shown._left(31.0) == ""


def test_estimates_come_from_the_profile_timers_and_the_trials_at_once():
    pause = scenarios.load("pause")
    one = pause.trial_seconds("default")
    assert one == 1.0 + 2 * pause.profile_params("default")["ttl_s"]
    assert pacing.estimate_seconds(pause, "default", 24, 12) == 2 * one
    # 12 one after another, 12 at once
    assert pacing.estimate_seconds(pause, "default", 24, 12, alone=12) == (12 + 1) * one
    timing = scenarios.load("timing")
    assert pacing.estimate_seconds(timing, "default", 500, 120) == timing.wall_budget("default")  # one window, not 500


def test_a_scenario_of_shared_fault_events_counts_its_events_and_their_subjects():
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    shown = ScenarioProgress(console, Progress(TextColumn("{task.fields[left]}"), console=console, disable=True),
                             "patroni", 6, 120.0, at_once=1, events=2)
    shown.advance_event([{"status": "ok", "safety": "safe"}] * 3)
    assert shown.done == 3 and shown.events_done == 1
    assert shown._left(60.0) == "~60 s left"  # one event of two took 60 s: the pace is the events'
    shown.advance_event([{"status": "error"}] * 3)
    shown.finish()
    lines = out.getvalue().splitlines()
    assert lines[0] == "patroni: 2 events, 6 subjects, about 2 min"
    assert lines[-1].endswith("2 events, 6 subjects (error 3, safe 3)")
