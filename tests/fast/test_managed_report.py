"""The managed-beside-scripted section computes "same" and "differs" from the promotion measures under its stated
tolerances: a planted figure that contradicts the run flips the sentence, and it renders from meta.json and
the trials alone."""

from lab.declarations.columns import Column, FaultColumns, to_meta
from lab.report.managed import (
    ACCEPTED_TOLERANCE,
    PROMOTE_TOLERANCE,
    Comparison,
    compare,
    compare_heard,
    section_managed_beside_scripted,
)
from lab.report.sections import RunView

MANAGED = FaultColumns("sentinel", "Redis failed over by Sentinel",
                       (Column("primary_paused", "paused", 16.1, "legend"),), True, True, control="redis_failover")
CONTROL = FaultColumns("redis_failover", "Redis failed over", (Column("caught_up", "scripted", 14, "legend"),),
                       True, True)
META = {**to_meta([MANAGED, CONTROL]), "backend_order": ["redis"], "capabilities": {"redis": ["lease_expiry"]}}


def trial(scenario: str, variant: str, index: int, promote_s: float | None, accepted: int, survived: int | None,
          heard: tuple[str, str] | None, backend: str = "redis") -> dict:
    signals = [] if heard is None else [{"at": 2.5, "how": heard[0], "via": heard[1], "text": "said"}]
    return {"id": f"{scenario}/{backend}/{variant}/{index}", "scenario": scenario, "backend": backend,
            "variant": variant, "index": index, "status": "ok", "verdict": "stale write accepted",
            "safety": "unsafe", "exercised": True,
            "measures": {"fault_at": 1.0, "holder": {"signals": signals}, "contender": {"granted_at": 2.0},
                         "promotion": {"manager": "scripted" if scenario == "redis_failover" else "sentinel 6.2.14",
                                       "promote_s": promote_s, "old_primary_accepted": accepted,
                                       "old_primary_accepting_s": accepted / 10 if accepted else None,
                                       "old_primary_writes_survived": survived}}}


def run(managed_promote=(2.4, 2.6), control_promote=(0.01, 0.02), managed_heard=("exception", "release()"),
        control_heard=None) -> str:
    trials = [trial("redis_failover", "caught_up", i, p, 50, 0, control_heard) for i, p in enumerate(control_promote)]
    trials += [trial("sentinel", "primary_paused", i, p, 100, 1, managed_heard) for i, p in enumerate(managed_promote)]
    text = section_managed_beside_scripted(RunView.of(trials, META))
    assert text is not None
    return text


def test_the_section_sets_the_two_side_by_side_and_names_where_they_differ():
    text = run()
    assert "### Redis failed over by Sentinel beside Redis failed over" in text
    assert "| redis_failover, every variant | scripted | 0.01 s (0.01-0.02, n=2) | 50 (50-50, n=2) |" in text
    assert ("| sentinel primary_paused | sentinel 6.2.14 | 2.50 s (2.40-2.60, n=2) | 100 (100-100, n=2) | 10.00 s "
            "(10.00-10.00, n=2) | 1 (1-1, n=2) | differs in time to promote and writes the old primary accepted; the "
            "same in surviving writes |") in text
    assert "Of the 3 comparisons above, 2 differ, 1 is the same and 0 are within noise." in text
    assert "| redis | nothing 2/2 | an exception from release() 2/2 (differs) |" in text
    assert "in 1 of 1 backend and variant cells" in text
    assert "more than 0.5 s or 25% of the larger apart" in text


def test_a_planted_promotion_time_flips_differs_to_same():
    text = run(control_promote=(2.45, 2.55))  # the scripted control planted as slow as Sentinel
    assert "| differs in writes the old primary accepted; the same in time to promote and surviving writes |" in text


def test_a_planted_signal_flips_what_the_holder_heard():
    text = run(control_heard=("exception", "release()"))
    assert "| redis | an exception from release() 2/2 | an exception from release() 2/2 (same) |" in text
    assert "in 0 of 1 backend and variant cells" in text


def test_medians_apart_but_ranges_overlapping_are_within_noise_not_differs():
    assert compare([0.1, 3.0], [2.0, 2.2], PROMOTE_TOLERANCE) is Comparison.WITHIN_NOISE
    assert compare([0.1, 0.2], [2.0, 2.2], PROMOTE_TOLERANCE) is Comparison.DIFFERS
    assert compare([2.0], [2.4], PROMOTE_TOLERANCE) is Comparison.SAME  # 0.4 s: within 0.5 s
    assert compare([40.0], [48.0], ACCEPTED_TOLERANCE) is Comparison.SAME  # 8 writes: within 25% of 48
    assert compare([], [1.0], PROMOTE_TOLERANCE) is Comparison.NOT_MEASURED
    assert compare_heard(["nothing", "nothing", "x"], ["x", "nothing"]) is Comparison.SAME  # a tie counts either way
    assert compare_heard(["nothing"], ["x"]) is Comparison.DIFFERS


def test_no_section_without_the_control_in_the_run_or_without_promotion_measures():
    only_managed = [trial("sentinel", "primary_paused", 0, 2.0, 100, 1, None)]
    assert section_managed_beside_scripted(RunView.of(only_managed, META)) is None
    older = trial("redis_failover", "caught_up", 0, 0.01, 50, 0, None)
    del older["measures"]["promotion"]  # a control run from before the promotion measures
    assert section_managed_beside_scripted(RunView.of([older, *only_managed], META)) is None


def test_a_run_recorded_before_controls_reads_none():
    data = MANAGED.to_json()
    del data["control"]
    assert FaultColumns.from_json("sentinel", data).control is None


def test_a_run_recorded_before_controls_takes_the_labs_own_declaration_and_an_explicit_none_stays_none(monkeypatch):
    """A run whose meta.json has no "control" key (recorded before the field) pairs as the lab declares it now, as
    the report does for runs recorded before any declaration; one that recorded control: None is not paired."""
    from lab.report import declared

    older = {**META, "faults": {name: {k: v for k, v in data.items() if k != "control"}
                                for name, data in META["faults"].items()}}
    trials = [trial("redis_failover", "caught_up", 0, 0.01, 50, 0, None),
              trial("sentinel", "primary_paused", 0, 2.5, 100, 1, None)]
    monkeypatch.setattr(declared, "_installed", {})
    assert section_managed_beside_scripted(RunView.of(trials, older)) is None
    monkeypatch.setattr(declared, "_installed", {"sentinel": MANAGED, "redis_failover": CONTROL})
    assert "beside Redis failed over" in section_managed_beside_scripted(RunView.of(trials, older))
    explicit = {**META, "faults": {**META["faults"], "sentinel": {**META["faults"]["sentinel"], "control": None}}}
    assert section_managed_beside_scripted(RunView.of(trials, explicit)) is None
