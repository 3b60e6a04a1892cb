"""The margin search (lab/measures/margin.py) on planted outcomes: no server, every property over many thresholds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.checkers.verdict import Finding, Kind, Valid, Verdict
from lab.checkers.words import margin_text
from lab.measures.margin import Margin, Outcome, Plan, Step, bounds, outcome_of, search

RANGE = (0.0, 1.5)


def planted(threshold: float):
    """A lease that breaks at threshold and above, and survives below it."""
    return lambda strength: Outcome.BROKE if strength >= threshold else Outcome.SURVIVED


@settings(max_examples=300, deadline=None)
@given(threshold=st.floats(0.001, 1.5), budget=st.integers(2, 14), confirm=st.integers(1, 3),
       resolution=st.sampled_from([0.01, 0.05, 0.2]))
def test_a_monotone_lease_is_bracketed_within_the_budget(threshold, budget, confirm, resolution):
    plan = Plan(*RANGE, budget, resolution, confirm)
    steps = search(planted(threshold), plan)
    margin = bounds(steps)
    assert len(steps) <= budget
    assert margin.broke is not None and margin.broke >= threshold  # the top of the range always breaks here
    if margin.survived is not None:
        assert margin.survived < threshold <= margin.broke and not margin.contradictions
    enough = 2 + math.ceil(math.log2((RANGE[1] - RANGE[0]) / resolution)) + 2 * (confirm - 1)
    if budget >= enough:  # then the bounds meet the resolution, and each rests on the trials asked for
        assert margin.gap is not None and margin.gap <= resolution + 1e-9
        assert margin.survived_trials >= confirm and margin.broke_trials >= confirm
    assert margin.trials == len(steps) and margin.to_json()["trials"] == len(steps)


def test_a_lease_that_survives_the_top_of_the_range_has_no_broken_bound_and_costs_one_trial():
    steps = search(lambda s: Outcome.SURVIVED, Plan(*RANGE, 8, 0.05))
    assert steps == [Step(1.5, Outcome.SURVIVED)]
    assert bounds(steps) == Margin(1.5, None, 1, 0, 1)


def test_a_lease_that_breaks_at_the_bottom_breaks_without_the_fault():
    steps = search(lambda s: Outcome.BROKE, Plan(*RANGE, 8, 0.05))
    assert [s.strength for s in steps] == [1.5, 0.0]
    assert bounds(steps).survived is None and bounds(steps).broke == 0.0


def test_an_unknown_step_ends_the_search_where_it_is():
    answers = iter([Outcome.BROKE, Outcome.SURVIVED, Outcome.UNKNOWN, Outcome.SURVIVED])
    steps = search(lambda s: next(answers), Plan(*RANGE, 8, 0.05))
    assert len(steps) == 3 and bounds(steps).unknown == (0.75,)
    assert (bounds(steps).survived, bounds(steps).broke) == (0.0, 1.5)


def test_confirming_a_bound_that_flips_moves_it_instead_of_hiding_it():
    """The second trial at the survived bound breaks: that strength is broken now, and the survived bound drops."""
    calls: dict[float, int] = {}

    def flaky(strength: float) -> Outcome:
        calls[strength] = calls.get(strength, 0) + 1
        if strength >= 1.0 or (strength == 0.9375 and calls[strength] > 1):
            return Outcome.BROKE
        return Outcome.SURVIVED

    steps = search(flaky, Plan(*RANGE, 7, 0.2, confirm=2))  # 1.5 0 0.75 1.125 0.9375, then 1.125 and 0.9375 again
    margin = bounds(steps)
    assert (margin.survived, margin.survived_trials) == (0.75, 1)
    assert (margin.broke, margin.broke_trials) == (0.9375, 2)  # one survived, one broke: broken


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5]),
                          st.sampled_from(list(Outcome))), min_size=1, max_size=20))
def test_bounds_never_claim_a_survived_strength_at_or_above_a_broken_one(pairs):
    """Any steps at all, monotone or not: the survived bound lies below the smallest broken strength, and every
    strength that survived above it is reported as a contradiction instead."""
    steps = [Step(s, o) for s, o in pairs]
    margin = bounds(steps)
    broken = [s for s, o in pairs if o is Outcome.BROKE]
    clean = {s for s, _ in pairs} - {s for s, o in pairs if o is not Outcome.SURVIVED}
    assert margin.broke == (min(broken) if broken else None)
    if margin.survived is not None and margin.broke is not None:
        assert margin.survived < margin.broke
    assert set(margin.contradictions) == {s for s in clean if broken and s > min(broken)}
    assert margin.trials == len(steps)


def _verdict(kind: Kind, lock: Valid) -> Verdict:
    return Verdict(kind, lock, True, (Finding("exclusion", lock, Kind.LOST if lock is Valid.FALSE else None),))


@pytest.mark.parametrize("kind, lock, outcome", [
    (Kind.STALE_WRITE_ACCEPTED, Valid.FALSE, Outcome.BROKE),
    (Kind.STALE_WRITE_REJECTED, Valid.FALSE, Outcome.BROKE),  # a fenced lock's lease broke; its fence held
    (Kind.STALE_WRITE_ACCEPTED, Valid.TRUE, Outcome.BROKE),  # told in time, wrote anyway: the company paid
    (Kind.LOST, Valid.FALSE, Outcome.BROKE),
    (Kind.HELD, Valid.TRUE, Outcome.SURVIVED),
    (Kind.INDETERMINATE, Valid.TRUE, Outcome.UNKNOWN),
    (Kind.NOT_ACQUIRED, Valid.TRUE, Outcome.UNKNOWN),
])
def test_survived_or_broke_comes_from_the_typed_verdict_alone(kind, lock, outcome):
    assert outcome_of(_verdict(kind, lock)) is outcome


def test_the_words_give_each_bound_its_trials_and_say_a_single_trial_is_one():
    margin = Margin(0.9375, 0.97, 2, 1, 9).to_json()
    text = margin_text(margin, _verdict(Kind.STALE_WRITE_ACCEPTED, Valid.FALSE))
    assert text == "survived 0.9375 TTL (2 trials), broke at 0.97 TTL (1 trial: stale write accepted)"
    assert "survived above a broken strength at 1.2" in margin_text({**margin, "contradictions": [1.2]})


def test_a_plan_that_cannot_search_is_refused():
    with pytest.raises(ValueError):
        Plan(1.0, 0.5, 8, 0.05)
    with pytest.raises(ValueError):
        Plan(0.0, 1.0, 1, 0.05)
