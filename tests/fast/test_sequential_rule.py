"""The sequential rule (DESIGN.md, "Strength"): a cell whose first trials disagree runs more, one that agrees or
failed stops at its profile's count, and an extra trial never starts before the first ones have finished."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lab.runner import pacing, waves
from lab.runner.pacing import settled
from scenarios.base import TrialSpec
from scenarios.pause import Pause

SAFE_KINDS = ("held", "stale write rejected", "rolled back", "intact")


def record(index: int, kind: str, exercised: bool | None, safety: str = "safe", backend: str = "xact") -> dict:
    return {"scenario": "pause", "backend": backend, "variant": "default", "index": index, "status": "ok",
            "safety": safety, "exercised": exercised, "judgement": {"kind": kind}}


def spec(index: int, backend: str = "xact") -> TrialSpec:
    return TrialSpec("pause", backend, "default", index)


def test_agreeing_trials_settle_the_cell_and_the_extra_trials_are_dropped():
    scenario = Pause()
    done = [record(i, "rolled back", True) for i in range(3)]
    assert settled(done)
    assert pacing.needed(scenario, "default", spec(2), done)  # the profile's own trials always run
    assert not pacing.needed(scenario, "default", spec(3), done)


def test_disagreeing_trials_ask_for_more():
    scenario = Pause()
    done = [record(0, "rolled back", True), record(1, "held", False), record(2, "rolled back", True)]
    assert not settled(done)
    assert pacing.needed(scenario, "default", spec(3), done) and pacing.needed(scenario, "default", spec(5), done)


def test_a_failure_found_stands_and_settles_the_cell():
    done = [record(0, "held", False), record(1, "stale write accepted", True, safety="unsafe"), record(2, "held", False)]
    assert settled(done)
    assert not pacing.needed(Pause(), "default", spec(3), done)


def test_another_cells_records_do_not_decide_this_one():
    done = [record(i, "held", False) for i in range(3)] + [record(3, "rolled back", True, backend="session")]
    assert not pacing.needed(Pause(), "default", spec(3), done)


def test_an_extra_trial_is_kept_while_its_cells_first_trials_are_not_all_in():
    """Dropped only once the cell's first trials settle it: with none or some of them finished, it is still needed."""
    scenario = Pause()
    assert pacing.needed(scenario, "default", spec(3), [])
    assert pacing.needed(scenario, "default", spec(3), [record(0, "held", False), record(1, "held", False)])
    assert not pacing.needed(scenario, "default", spec(3), [record(i, "held", False) for i in range(3)])


def test_an_extra_trial_waits_until_its_cells_first_trials_finished():
    scenario = Pause()
    assert pacing.later(scenario, "default", spec(3), finished=2)
    assert not pacing.later(scenario, "default", spec(3), finished=3)
    assert not pacing.later(scenario, "default", spec(1), finished=0)  # the profile's own never wait


def test_the_plan_holds_the_extra_trials_after_every_first_one():
    from backends import load

    specs = [s for s in Pause().plan([load("xact"), load("session")], "default") if s.skip is None]
    assert max(s.index for s in specs) == 2 + Pause.pacing.extra_trials_when_varied
    first_extra = next(i for i, s in enumerate(specs) if s.index == 3)
    assert all(s.index < 3 for s in specs[:first_extra])  # repetition by repetition: the extras come last


def test_dispatch_starts_what_may_go_and_keeps_what_must_wait():
    budget = waves.SessionBudget(10)
    queue = waves.Dispatch([("extra", 1), ("first", 1)], budget)
    started = queue.ready(2, later=lambda t: t == "extra")
    assert [t for t, _ in started] == ["first"] and bool(queue)
    assert [t for t, _ in queue.ready(2)] == ["extra"]


@given(st.lists(st.tuples(st.sampled_from(SAFE_KINDS), st.sampled_from([True, False, None])), min_size=1, max_size=8))
def test_a_cell_is_settled_exactly_when_its_safe_trials_agree(outcomes):
    done = [record(i, kind, exercised) for i, (kind, exercised) in enumerate(outcomes)]
    assert settled(done) == (len(set(outcomes)) == 1)
