"""The sequential rule that ends repetitions for precision: it stops early on a tight measurement, runs to its cap
on a noisy one, never stops before its floor, and says which happened (planted sequences, no server)."""

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lab.measures.precision import Rule, describe, repeat
from lab.runner import pacing
from scenarios.base import TrialSpec

RULE = Rule(tolerance=0.05, floor=3, cap=8)


def planted(values):
    """A measurement whose repetition i gives values[i] as its paired ratio."""
    return lambda i: (values[i],)


def test_a_tight_measurement_stops_at_the_floor():
    done, outcome = repeat(RULE, planted([1.00, 1.02, 0.99, 1.01, 1.00, 1.0, 1.0, 1.0]))
    assert len(done) == 3
    assert outcome["reached"] and outcome["repetitions"] == 3
    assert describe(outcome) == "3 repetitions (spread +-2% within +-5%)"


def test_a_noisy_measurement_runs_to_its_cap_and_says_so():
    done, outcome = repeat(RULE, planted([1.0, 1.4, 0.7, 1.3, 0.8, 1.2, 0.9, 1.1, 1.0]))
    assert len(done) == RULE.cap
    assert not outcome["reached"]
    assert describe(outcome).startswith("8 repetitions (stopped at the cap: spread")


def test_it_never_stops_before_its_floor_however_tight():
    done, outcome = repeat(Rule(tolerance=0.05, floor=4, cap=8), planted([1.0] * 8))
    assert len(done) == 4 and outcome["reached"]


def test_every_figure_the_repetitions_serve_must_be_tight():
    values = [(1.0, 1.0), (1.0, 1.5), (1.0, 0.6), (1.0, 1.4), (1.0, 0.7)]
    done, outcome = repeat(Rule(tolerance=0.05, floor=2, cap=5), lambda i: values[i])
    assert len(done) == 5 and not outcome["reached"]


def test_a_rule_needs_a_floor_within_its_cap():
    with pytest.raises(ValueError):
        Rule(tolerance=0.05, floor=5, cap=3)


@settings(deadline=None)  # a loaded machine must not fail a pure test on time
@given(st.lists(st.floats(min_value=0.1, max_value=10.0), min_size=20, max_size=20),
       st.integers(1, 6), st.integers(0, 10), st.floats(min_value=0.01, max_value=0.5))
def test_it_stops_between_its_floor_and_its_cap_and_only_on_a_spread_within_tolerance(values, floor, extra, tol):
    rule = Rule(tolerance=tol, floor=floor, cap=floor + extra)
    done, outcome = repeat(rule, planted(values))
    assert floor <= len(done) <= floor + extra
    if len(done) < rule.cap:
        assert outcome["reached"] and rule.spread([d[0] for d in done]) <= tol


def perf_records(seconds_by_rep):
    """Planted perf records: one per (repetition, configuration) with its timed seconds."""
    return [{"index": i, "variant": variant, "status": "ok", "measures": {"seconds": seconds}}
            for i, rep in enumerate(seconds_by_rep) for variant, seconds in rep.items()]


def test_whynot_plans_one_throughput_trial_per_backend_and_the_profiles_count_for_the_other_experiments():
    """Throughput repeats inside its trial by the rule (Experiment.trials = 1); more trials would only repeat it."""
    import backends
    from scenarios.whynot import WhyNot

    whynot = WhyNot()
    specs = [s for s in whynot.plan([backends.load("session")], "default") if s.skip is None]
    per_variant = {}
    for spec in specs:
        per_variant.setdefault(spec.variant, []).append(spec.index)
    assert per_variant["throughput"] == [0]
    assert per_variant["xmin_horizon"] == [0, 1, 2] == list(range(whynot.profile_params("default")["trials"]))


def test_the_cost_table_stops_repeating_once_every_configurations_paired_ratio_is_tight():
    from scenarios.perf import Perf

    perf = Perf()

    def enough(records):  # the next repetition's first trial is no longer needed
        spec = TrialSpec("perf", "none", "one_transaction_for_all", 1 + max(r["index"] for r in records))
        return not pacing.needed(perf, "default", spec, records)

    tight = {"one_transaction_for_all": 1.0, "per_company_lock": 2.0}
    assert not enough(perf_records([tight, tight]))  # below the floor of three
    assert enough(perf_records([tight, tight, tight]))
    assert not enough(perf_records([tight, tight, tight])[:-1])  # the third still under way
    assert pacing.needed(perf, "default", TrialSpec("perf", "xact", "per_company_lock", 2),
                       perf_records([tight, tight, tight])[:-1])  # and its last configuration runs
    # a machine that slows down alike for both keeps the paired ratio: still tight
    slowed = {"one_transaction_for_all": 2.0, "per_company_lock": 4.1}
    assert enough(perf_records([tight, slowed, tight]))
    noisy = [{"one_transaction_for_all": 1.0, "per_company_lock": s} for s in (2.0, 2.6, 1.6, 2.4)]
    assert not enough(perf_records(noisy))
    outcome = perf.precision("default", perf_records(noisy))
    assert outcome["repetitions"] == 4 and not outcome["reached"]


def test_a_settled_verdict_stops_the_repetitions_at_the_floor_and_says_so():
    """A noisy measurement whose verdict can no longer change stops at the floor instead of the cap."""
    done, outcome = repeat(RULE, planted([1.0, 1.4, 0.7, 1.3, 0.8, 1.2, 0.9, 1.1]), settled=lambda: True)
    assert len(done) == RULE.floor
    assert outcome["settled"] and not outcome["reached"]
    assert describe(outcome).startswith("3 repetitions (the verdict settled")


def test_an_unsettled_verdict_runs_to_the_cap_and_a_tight_one_is_reached_not_settled():
    asked = []
    done, outcome = repeat(RULE, planted([1.0, 1.4, 0.7, 1.3, 0.8, 1.2, 0.9, 1.1]),
                           settled=lambda: asked.append(1) or False)
    assert len(done) == RULE.cap and not outcome["settled"]
    assert len(asked) == RULE.cap - RULE.floor  # asked from the floor on, never at the cap
    done, outcome = repeat(RULE, planted([1.0] * 8), settled=lambda: True)
    assert len(done) == 3 and outcome["reached"] and not outcome["settled"]


def test_a_spent_time_budget_stops_the_repetitions_even_before_the_floor_and_says_so():
    """A repetition that ran long (a slice held open by a blocked acquire) spends the budget: the rule stops there,
    below its floor, and the outcome says the budget ran out rather than calling the figure precise."""
    spent = iter([False, True])
    done, outcome = repeat(RULE, planted([1.0, 1.4, 0.7, 1.3, 0.8, 1.2, 0.9, 1.1]), out_of_time=lambda: next(spent))
    assert len(done) == 2 < RULE.floor
    assert outcome["out_of_time"] and not outcome["reached"] and not outcome["settled"]
    assert describe(outcome).startswith("2 repetitions (its time budget ran out")
    done, outcome = repeat(RULE, planted([1.0] * 8), out_of_time=lambda: True)
    assert len(done) == 1 and outcome["out_of_time"]  # one repetition is always taken
    done, outcome = repeat(RULE, planted([1.0] * 8), out_of_time=lambda: False)
    assert len(done) == RULE.floor and outcome["reached"] and not outcome["out_of_time"]


def test_throughputs_verdict_is_settled_only_when_no_repetition_could_change_it():
    """Overlapping ranges only widen and a peak of every worker cannot rise: settled. Disjoint ranges, or a peak
    below the workers, could still change with one more repetition: not settled."""
    from scenarios.whynot.throughput import WORKERS, verdict_settled

    top = max(WORKERS)
    assert verdict_settled([1.5, 2.0, 1.7], [1.9, 2.2, 2.1], [top, top])
    assert not verdict_settled([1.0, 1.1, 1.05], [1.9, 2.2, 2.1], [top, top])  # "less than xact": not final
    assert not verdict_settled([2.5, 2.6], [1.9, 2.2], [top, top])  # "more than xact": not final
    assert not verdict_settled([1.5, 2.0], [1.9, 2.2], [1, top])  # serialized so far: one repetition could differ
    assert not verdict_settled([], [1.9], [top, top])


@settings(deadline=None)
@given(st.lists(st.floats(min_value=0.5, max_value=4.0), min_size=3, max_size=12),
       st.lists(st.floats(min_value=0.5, max_value=4.0), min_size=3, max_size=12), st.integers(3, 11))
def test_a_settled_throughput_verdict_is_the_verdict_at_any_later_count(mine, base, n):
    """Whatever later repetitions give, the verdict at the cap is the one settled at n (n within both lists)."""
    from scenarios.whynot.throughput import WORKERS, Throughput, verdict_settled

    n = min(n, len(mine), len(base))
    top = max(WORKERS)
    assume(verdict_settled(mine[:n], base[:n], [top, top]))

    def words(m, b):
        return Throughput().verdict({"backend": [{"workers": top, "in_flight_peak": top}], "speedups": m,
                                     "baseline_speedups": b})
    assert words(mine[:n], base[:n]) == words(mine, base)
