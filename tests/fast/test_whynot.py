"""The whynot scenario without a server: which alternatives a backend gets from what it declares (the skip
reasons are in saved runs, and the report prints them), and what each alternative's measures say (verdict,
safety), each against a planted figure that changes the words."""

import sys
from types import SimpleNamespace

import pytest

from backends.base import Backend
from lab.declarations.capabilities import Capability
from lab.checkers.outcomes import Safety
from scenarios.whynot import EXPERIMENTS, WhyNot, experiment_of

# The order meta.json records and the report shows, as the committed reference runs have it.
VARIANTS = ("xmin_horizon", "guard_off_role", "giant_transaction", "throughput", "fk_child_insert", "no_parent_row",
            "backstop_loser", "same_inputs", "different_inputs", "queue_exclusion")
# Why each variant is n/a for a backend that declares nothing, word for word as the saved runs recorded it.
REASONS = {
    "xmin_horizon": "needs a PostgreSQL session lock held across writes",
    "guard_off_role": "does not declare it turns the guard off on a role (guard_off_on)",
    "giant_transaction": "holds its right between writes on a connection of its own, or cannot write several "
                         "companies in one transaction (no rebuild_batch)",
    "throughput": "neither a PostgreSQL session lock held across writes nor a queue (a lock per company costs what "
                  "xact does: see the cost table)",
    "fk_child_insert": "locks no parent row (declares no row_lock_strength)",
    "no_parent_row": "locks no parent row (declares no row_lock_strength)",
    "backstop_loser": "keeps no unique marker row",
    "same_inputs": "writes no upsert on a natural key",
    "different_inputs": "writes no upsert on a natural key",
    "queue_exclusion": "hands out no companies (no rebuild_next)",
}


def declaring(*capabilities, services=("postgres",)):
    """A backend class that declares only these capabilities (nothing else about it is looked at)."""
    return type("Planted", (Backend,), {"name": "planted", "capabilities": frozenset(capabilities),
                                        "services": services})


def runs(cls) -> set[str]:
    return {v for v in WhyNot.variants if WhyNot().variant_skip(v, cls) is None}


def test_the_variants_keep_their_recorded_order():
    assert WhyNot.variants == VARIANTS


def test_each_variant_belongs_to_one_experiment_whose_module_says_what_it_measures():
    declared = [variant for experiment in EXPERIMENTS for variant in experiment.variants]
    assert len(declared) == len(set(declared))
    for experiment in EXPERIMENTS:
        cls = type(experiment)
        assert cls.__doc__ and sys.modules[cls.__module__].__doc__, cls.__name__
        assert all(experiment_of(variant) is experiment for variant in experiment.variants)
    with pytest.raises(ValueError):
        experiment_of("inputs")  # the kind both idempotent variants shared before: no variant of its own


def test_a_trial_goes_to_its_variants_experiment_and_records_the_variant_as_its_kind(monkeypatch):
    for experiment in EXPERIMENTS:
        monkeypatch.setattr(type(experiment), "run", lambda self, env, variant: {"ran": type(self).__name__})
    for variant in VARIANTS:
        measures = WhyNot().run_trial(SimpleNamespace(spec=SimpleNamespace(variant=variant)))
        assert measures == {"kind": variant, "ran": type(experiment_of(variant)).__name__}


def test_a_backend_that_declares_nothing_gets_every_reason_as_recorded():
    nothing = declaring()
    assert {v: WhyNot().variant_skip(v, nothing) for v in VARIANTS} == REASONS


@pytest.mark.parametrize("capabilities, services, expected", [
    ((Capability.SESSION_LOCK,), ("postgres",), {"xmin_horizon", "throughput"}),
    ((Capability.SESSION_LOCK,), ("postgres", "redis"), set()),  # a session lock, but not on PostgreSQL
    ((Capability.QUEUE,), ("postgres",), {"throughput", "queue_exclusion"}),
    ((Capability.BATCH_REBUILD,), ("postgres",), {"giant_transaction"}),
    ((Capability.BATCH_REBUILD, Capability.IN_TRANSACTION), ("postgres",), {"giant_transaction"}),
    ((Capability.BATCH_REBUILD, Capability.LEASE_EXPIRY), ("postgres",), set()),  # holds a right between writes
    ((Capability.PARENT_ROW_LOCK,), ("postgres",), {"fk_child_insert", "no_parent_row"}),
    ((Capability.UNIQUE_MARKER,), ("postgres",), {"backstop_loser"}),
    ((Capability.NATURAL_KEY,), ("postgres",), {"same_inputs", "different_inputs"}),
    ((Capability.GUARD_OFF_ON_ROLE,), ("postgres",), {"guard_off_role"}),
])
def test_a_backend_gets_the_alternatives_its_capabilities_select(capabilities, services, expected):
    assert runs(declaring(*capabilities, services=services)) == expected


def judged(m: dict) -> tuple[str, Safety]:
    scenario = WhyNot()
    verdict = scenario.verdict(m)
    return verdict, scenario.safety(m, verdict)


def test_the_horizon_verdict_follows_the_lock_and_what_vacuum_kept():
    def horizon(held, not_removable):
        return {"kind": "xmin_horizon", "backend": {"held_after": held, "not_removable": not_removable}}
    assert judged(horizon(True, 0)) == ("holds back nothing", Safety.SAFE)
    assert judged(horizon(True, 3000)) == ("holds back vacuum", Safety.SAFE)
    assert judged(horizon(False, 3000)) == ("lock session ended by the guard", Safety.SAFE)
    # Another session (an autovacuum's ANALYZE, a tool's open transaction) held an older horizon: not the lock's.
    shared = horizon(True, 3000)
    shared["backend"]["others_held"] = True
    assert judged(shared) == ("not measured: another session held the horizon too", Safety.SAFE)


def test_the_guard_on_a_role_shows_nothing_unless_the_control_was_ended():
    def role(held, control):
        return {"kind": "guard_off_role", "holder": {"held_after": held}, "control": {"state": control}}
    assert judged(role(True, "gone")) == ("survived the database's guard", Safety.SAFE)
    assert judged(role(False, "gone")) == ("lock session ended by the guard", Safety.SAFE)
    assert judged(role(True, "idle in transaction"))[0] == "the database's guard ended nothing: not shown"


def test_the_giant_transaction_is_unsafe_only_when_a_kill_tears_a_company():
    def shape(written, lost, not_removable, whole=True):
        return {"written": written, "lost": lost, "not_removable": not_removable, "companies_whole": whole}
    m = {"kind": "giant_transaction", "exercised": True, "giant": shape(4, 4, 1000), "per_company": shape(5, 1, 250)}
    assert judged(m) == ("killed halfway: one transaction lost 4 of 4 companies written, one per company lost 1 of 5; "
                         "held back more dead rows", Safety.SAFE)
    assert WhyNot().exercised(m) is True
    m["per_company"] = shape(5, 1, 1000, whole=False)
    assert judged(m) == ("killed halfway: one transaction lost 4 of 4 companies written, one per company lost 1 of 5; "
                         "held back no more dead rows", Safety.UNSAFE)
    m["per_company"] = {**shape(5, 1, 1000), "others_held": True}  # stop 38's CI: another session held the horizon
    assert judged(m)[0].endswith("; not compared: another session held the horizon too")


def test_the_throughput_verdict_says_the_shape_then_the_speed_within_its_spread():
    def speed(peak, mine):
        return {"kind": "throughput", "backend": [{"workers": 4, "in_flight_peak": peak}], "speedups": mine,
                "baseline_speedups": [2.0, 2.5]}
    assert judged(speed(1, [1.0, 1.1])) == ("serialized: 1 of 4 workers' writes in flight at once; scales less "
                                            "than xact", Safety.SAFE)
    assert judged(speed(4, [2.4, 3.0]))[0] == "parallel: 4 of 4 workers' writes in flight at once; scales like xact, " \
                                              "within noise"
    assert judged(speed(4, [2.6, 3.0]))[0].endswith("; scales more than xact")


def test_the_row_lock_verdicts_follow_the_wait_and_the_parent_row():
    assert judged({"kind": "fk_child_insert", "child_waited": True}) == ("child insert waited", Safety.SAFE)
    assert judged({"kind": "fk_child_insert", "child_waited": False})[0] == "child insert did not wait"

    def parent(lock_only, create, whole):
        return {"kind": "no_parent_row", "lock_only": {"company": lock_only},
                "create": {"company": create, "whole": whole}}
    assert judged(parent("merged (500 rows)", "intact (250 rows)", True)) == (
        "no parent row, lock only: merged (500 rows); parent created first: intact (250 rows)", Safety.SAFE)
    assert judged(parent("merged (500 rows)", "merged (500 rows)", False))[1] == Safety.UNSAFE


def test_the_backstop_is_unsafe_when_the_company_is_torn_or_not_whole():
    def loser(whole, torn):
        return {"kind": "backstop_loser", "loser_saw": "loser failed with 23505 after waiting", "whole": whole,
                "torn": torn}
    assert judged(loser(True, [])) == ("loser failed with 23505 after waiting", Safety.SAFE)
    assert judged(loser(True, [0]))[1] == Safety.UNSAFE
    assert judged(loser(False, []))[1] == Safety.UNSAFE


def inputs(variant: str, **m) -> dict:
    return {"kind": variant, "same": variant == "same_inputs", **m}


def test_the_inputs_verdicts_say_whose_rows_the_company_kept():
    assert judged(inputs("same_inputs", identical=True)) == ("same rows", Safety.SAFE)
    assert judged(inputs("same_inputs", identical=False))[0] == "rows differ"
    kept = {"after_delete": False, "before_commit": True}
    assert judged(inputs("different_inputs", last_committer_won=True, newest_kept=kept)) == (
        "last committer's rows kept; the newer run's output overwritten in 1 of 2 overlaps", Safety.SAFE)
    assert judged(inputs("different_inputs", last_committer_won=False, newest_kept=kept))[0] == \
        "rows of neither run alone"


def test_the_queue_is_unsafe_when_a_company_goes_to_two_runs_or_is_torn():
    def queue(duplicates=(), intact=True, asked_whole=True):
        return {"kind": "queue_exclusion", "duplicates": list(duplicates), "intact": intact,
                "second_asks": {"whole": True}, "second_asks_new_job": {"whole": asked_whole}}
    assert judged(queue()) == ("no company went to two runs", Safety.SAFE)
    assert judged(queue(duplicates=[7])) == ("a company went to two runs", Safety.UNSAFE)
    assert judged(queue(intact=False))[1] == Safety.UNSAFE
    assert judged(queue(asked_whole=False))[1] == Safety.UNSAFE


def test_two_commits_in_the_same_millisecond_leave_either_run_the_last_committer():
    from scenarios.whynot.inputs import last_committers

    assert last_committers([{"run": "run1", "ended": 1.02}, {"run": "run2", "ended": 1.026}]) == ["run2"]
    assert last_committers([{"run": "run1", "ended": 1.033}, {"run": "run2", "ended": 1.033}]) == ["run1", "run2"]


def test_another_sessions_hold_is_read_from_vacuums_cutoff_in_the_servers_circular_xid_order():
    from scenarios.whynot._vacuum import others_held
    # The session's xid is VACUUM's cutoff: the hold is its own, even when another session's xmin equals it.
    assert others_held({"horizon_xid": 1000}, {"cutoff_xid": 1000, "not_removable": 250}) is False
    # The cutoff lies before the session's horizon: another session held VACUUM back (stop 38's CI).
    assert others_held({"horizon_xid": 1000}, {"cutoff_xid": 990, "not_removable": 1000}) is True
    # Across the 32-bit wrap: 2^32 - 5 comes before 3.
    assert others_held({"horizon_xid": 3}, {"cutoff_xid": 2**32 - 5, "not_removable": 1}) is True
    assert others_held({"horizon_xid": 2**32 - 5}, {"cutoff_xid": 2**32 - 5, "not_removable": 1}) is False
    # A session holding nothing cannot keep dead rows: if VACUUM kept some, another did.
    assert others_held({"horizon_xid": None}, {"cutoff_xid": 77, "not_removable": 0}) is False
    assert others_held({"horizon_xid": None}, {"cutoff_xid": 77, "not_removable": 12}) is True
    assert others_held({"horizon_xid": 5}, {"cutoff_xid": None, "not_removable": 12}) is None  # VACUUM did not say
