"""The margin search (lab/measures/margin.py) on planted outcomes: no server, every property over many thresholds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.checkers.judge import judge
from lab.checkers.ops import F, Op, Type
from lab.checkers.verdict import Finding, Kind, Valid, Verdict
from lab.checkers.words import margin_text
from lab.measures.margin import Confidence, Margin, Outcome, Plan, Step, bounds, outcome_of, search

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


def margin_step(renew: Type | None = None, release: Type | None = Type.OK) -> list[Op]:
    """One margin step's history in which nobody else got in: the holder granted, the fault, a contender refused,
    then what the holder's lease did (a renewal answered `renew`, its release answered `release`)."""
    history = [Op("holder", Type.INVOKE, F.ACQUIRE, 0.0), Op("holder", Type.OK, F.ACQUIRE, 0.01, {"scope": "run"}),
               Op("fault", Type.OK, F.FAULT, 0.02, {"name": "clock"}), Op("contender", Type.INVOKE, F.ACQUIRE, 0.05),
               Op("contender", Type.FAIL, F.ACQUIRE, 0.6), Op("fault", Type.OK, F.HEAL, 0.61, {"name": "clock"})]
    if renew is not None:
        history.append(Op("holder", renew, F.RENEW, 0.7))
    history += [Op("holder", Type.INVOKE, F.WRITE, 0.8, {"company": 1}),
                Op("holder", Type.INVOKE, F.COMMIT, 0.85, {"company": 1}),
                Op("holder", Type.OK, F.WRITE, 0.9, {"company": 1})]
    if release is not None:
        history += [Op("holder", Type.INVOKE, F.RELEASE, 1.0), Op("holder", release, F.RELEASE, 1.01)]
    return history


KEPT = margin_step()  # its release succeeded: the lease demonstrably held


@pytest.mark.parametrize("renew, release, outcome", [
    (Type.FAIL, Type.OK, Outcome.LAPSED),  # a renewal failed: the lease was gone, though nobody took it
    (Type.FAIL, None, Outcome.LAPSED),
    (None, Type.FAIL, Outcome.LAPSED),  # release raised (NotAcquired): gone before the holder gave it back
    (Type.OK, Type.FAIL, Outcome.LAPSED),
    (None, Type.OK, Outcome.SURVIVED),
    (Type.OK, None, Outcome.SURVIVED),
    (None, None, Outcome.UNKNOWN),  # nothing the holder did shows its lease either way
])
def test_a_margin_trial_whose_renew_failed_is_not_survived(renew, release, outcome):
    """The checkers find nothing wrong in any of these (nobody else got in): what the lease did decides."""
    history = margin_step(renew, release)
    verdict = judge(history, {1: {"rows": 250, "runs": ["holder"]}}, 250, lease_ttl=1.0)
    assert verdict.kind is Kind.HELD and verdict.lock is Valid.TRUE
    assert outcome_of(verdict, history) is outcome


def test_a_lease_lost_and_not_taken_is_no_survived_bound_and_ends_the_search():
    answers = iter([Outcome.BROKE, Outcome.SURVIVED, Outcome.LAPSED, Outcome.SURVIVED])
    steps = search(lambda s: next(answers), Plan(*RANGE, 8, 0.05))
    margin = bounds(steps)
    assert len(steps) == 3 and margin.lapsed == (0.75,)
    assert (margin.survived, margin.broke) == (0.0, 1.5)
    again = bounds([Step(1.5, Outcome.BROKE), Step(0.75, Outcome.SURVIVED), Step(0.75, Outcome.LAPSED)])
    assert again.survived is None and again.lapsed == (0.75,)  # one lapse at a strength: it did not survive there


def test_a_breaking_point_on_one_broken_trial_says_1_of_2():
    one = bounds([Step(1.5, Outcome.BROKE), Step(0.0, Outcome.SURVIVED), Step(0.75, Outcome.BROKE),
                  Step(0.75, Outcome.SURVIVED)])
    assert (one.broke, one.broke_trials, one.breaks, one.confidence) == (0.75, 2, 1, Confidence.SHORT)
    assert "broke at 0.75 TTL (2 trials; 1 of 2)" in margin_text(one.to_json())
    alone = bounds([Step(1.5, Outcome.BROKE), Step(0.0, Outcome.BROKE)])  # broke at the bottom, once
    assert (alone.broke, alone.breaks, alone.confidence) == (0.0, 1, Confidence.SHORT)
    two = bounds([Step(1.5, Outcome.BROKE), Step(0.0, Outcome.SURVIVED), Step(0.75, Outcome.BROKE),
                  Step(0.75, Outcome.BROKE)])
    assert (two.breaks, two.confidence) == (2, Confidence.CONFIRMED)
    assert "of 2" not in margin_text(two.to_json())
    assert bounds([Step(1.5, Outcome.SURVIVED)]).confidence is None  # no breaking point, nothing to confirm


@pytest.mark.parametrize("kind, lock, outcome", [
    (Kind.STALE_WRITE_ACCEPTED, Valid.FALSE, Outcome.BROKE),
    (Kind.STALE_WRITE_REJECTED, Valid.FALSE, Outcome.BROKE),  # a fenced lock's lease broke; its fence held
    (Kind.STALE_WRITE_ACCEPTED, Valid.TRUE, Outcome.BROKE),  # told in time, wrote anyway: the company paid
    (Kind.LOST, Valid.FALSE, Outcome.BROKE),
    (Kind.HELD, Valid.TRUE, Outcome.SURVIVED),
    (Kind.INDETERMINATE, Valid.TRUE, Outcome.UNKNOWN),
    (Kind.NOT_ACQUIRED, Valid.TRUE, Outcome.UNKNOWN),
])
def test_survived_or_broke_comes_from_the_typed_verdict_and_what_the_lease_did(kind, lock, outcome):
    assert outcome_of(_verdict(kind, lock), KEPT) is outcome


def test_the_words_give_each_bound_its_trials_and_say_a_single_trial_is_one():
    margin = Margin(0.9375, 0.97, 2, 1, 9, breaks=1).to_json()
    text = margin_text(margin, _verdict(Kind.STALE_WRITE_ACCEPTED, Valid.FALSE))
    assert text == "survived 0.9375 TTL (2 trials), broke at 0.97 TTL (1 trial: stale write accepted; 1 of 2)"
    assert "survived above a broken strength at 1.2" in margin_text({**margin, "contradictions": [1.2]})


def test_a_plan_that_cannot_search_is_refused():
    with pytest.raises(ValueError):
        Plan(1.0, 0.5, 8, 0.05)
    with pytest.raises(ValueError):
        Plan(0.0, 1.0, 1, 0.05)


def test_a_lease_fault_trial_records_its_failed_renewal_where_the_margin_reads_it():
    """The holder process reports its keep-alive's first failed renewal (lab/holder/process.py's 'held' event); the
    lease-fault history records it as a failed renew, so a step whose release then succeeded is still no survival."""
    from lab.checkers.ops import Recorder
    from scenarios._lease_faults import lease_history

    def said(t, event, **fields):
        return {"t": t, "run": "holder", "event": event, **fields}

    events = [said(100.0, "acquire", granted=True, token=1), said(100.1, "at_point"), said(103.1, "resumed"),
              said(103.3, "write", outcome="committed"), said(103.2, "commit_asked"),
              said(103.35, "held", held=False, noticed_loss_at=101.5, noticed_how="returned False"),
              said(103.4, "release", result="released")]
    contender = Recorder(100.0)
    contender.add("contender", Type.INVOKE, F.ACQUIRE, at=102.4)
    contender.add("contender", Type.FAIL, F.ACQUIRE, at=103.0)
    history = lease_history(events, contender, 1, "run", "pause", 100.2, 103.0)
    assert [(o.process, o.type, o.time) for o in history if o.f is F.RENEW] == [("holder", Type.FAIL, 1.5)]
    verdict = judge(history, {1: {"rows": 250, "runs": ["holder"]}}, 250, lease_ttl=1.0)
    assert verdict.kind is Kind.HELD and outcome_of(verdict, history) is Outcome.LAPSED
    kept = lease_history([e for e in events if e["event"] != "held"], contender, 1, "run", "pause", 100.2, 103.0)
    assert outcome_of(judge(kept, {1: {"rows": 250, "runs": ["holder"]}}, 250), kept) is Outcome.SURVIVED
