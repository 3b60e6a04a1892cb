"""The Why-not rows backed by the whynot scenario: each sentence follows its figures (plant one, the words change),
and a run without whynot trials keeps the old 'reasoned, not measured' text."""

from lab.report.sections import RunView
from lab.report import whynot
from lab.report.common import trials_frame
from lab.report.summary import section_why_not
from lab.records.results import RunFolder
from tests.fast.test_reference_report import ROOT
from tests.fast.test_report import META
from tests.fast.test_report_claims import trial


def frame(*trials):
    return trials_frame(list(trials), META)


def holding(held=True, xmin=None, not_removable=0):
    return {"held_after": held, "xmin_age": xmin, "xid_age": None, "not_removable": not_removable, "deleted": 3000,
            "state": "idle in transaction" if held else "gone"}


def horizon(backend="session_guard_off", **mine):
    return trial("whynot", backend, "xmin_horizon", "x", {
        "kind": "xmin_horizon", "timeout_s": 0.5, "backend": holding(**mine), "baseline": holding(),
        "baseline_backend": "session_autocommit",
        "open_xid": {**holding(not_removable=3000), "xid_age": 13, "cutoff_xids_old": 13}})


def test_a_run_without_whynot_trials_renders_the_rows_as_before():
    f = frame(trial("overlap", "xact", "two_runs", "intact (250 rows)", {"rows_final": 250}))
    assert whynot.guard_off(f) is None and whynot.row_lock_or_unique(f) is None and whynot.neighbours(f) is None
    view = RunView(f, META, [], "")
    assert section_why_not(view).count("reasoned, not measured (no scenario covers it)") == 8


def test_the_guard_off_row_follows_whether_the_lock_held_and_what_vacuum_kept():
    text = whynot.guard_off(frame(horizon()))
    assert "held its lock past it in 1/1" in text and "held no snapshot and no transaction id" in text
    assert "left 0 dead rows" in text and "left 3000 of 3000 not removable" in text
    planted = whynot.guard_off(frame(horizon(held=False, xmin=42, not_removable=2500)))
    assert "held its lock past it in 0/1" in planted
    assert "held the horizon in 1/1 trials (backend_xmin age 42" in planted and "left 2500 dead rows" in planted
    both = whynot.guard_off(frame(horizon(), horizon(backend="session", held=False)))
    assert "session kept its lock in 0/1" in both


def fk(backend, strength, seconds, waited):
    return trial("whynot", backend, "fk_child_insert", "x", {
        "kind": "fk_child_insert", "lock_strength": strength, "hold_s": 0.4, "child_idle": {"seconds": 0.002},
        "child_during": {"seconds": seconds}, "child_waited": waited,
        "child_wait_event": "Lock/transactionid" if waited else None})


def backstop(outcome, sqlstate):
    loser = {"outcome": outcome, "waited": 0.4, "error": "UniqueViolation: dup" if sqlstate else None,
             "sqlstate": sqlstate}
    return trial("whynot", "unique_backstop", "backstop_loser", "x", {
        "kind": "backstop_loser", "runs": [{"outcome": "committed"}, loser], "loser_deleted": None, "torn": [],
        "rows_seen": [250], "later_rebuild": "committed"})


def test_the_row_lock_row_follows_the_waits_and_the_losers_outcome():
    text = whynot.row_lock_or_unique(frame(fk("row_lock", "UPDATE", 0.41, True),
                                           fk("row_lock_no_key", "NO KEY UPDATE", 0.003, False),
                                           backstop("failed", "23505")))
    assert "FOR UPDATE (row_lock): a child row referencing the company took 0.410 s" in text
    assert "it waited in 1/1 (Lock/transactionid)" in text and "it waited in 0/1" in text
    assert "then failed in 1/1: UniqueViolation: dup (23505)" in text and "only refuses" in text
    planted = whynot.row_lock_or_unique(frame(fk("row_lock", "UPDATE", 0.002, False), backstop("committed", None)))
    assert "it waited in 0/1" in planted and "rebuilt in 1/1" in planted and "only refuses" not in planted


def test_the_neighbours_row_follows_duplicates_overwrites_and_speedups_and_names_kafka():
    queue = trial("whynot", "queue", "queue_exclusion", "x", {
        "kind": "queue_exclusion", "runs": 3, "companies": 24, "rebuilt": 24, "per_s": 100.0, "duplicates": [],
        "intact": True, "second_asks": {"outcome": "skipped", "waited": 0.001},
        "second_asks_new_job": {"outcome": "skipped", "waited": 0.4}})
    overlaps = {p: {"tags_as_expected": True, "final": {"rows": 250}} for p in ("after_delete", "before_commit")}
    different = trial("whynot", "idempotent", "different_inputs", "x", {
        "kind": "inputs", "same": False, "overlaps": overlaps,
        "newest_kept": {"after_delete": False, "before_commit": True}})

    def speed(mine):
        rows = [{"workers": w, "per_s": [100.0 * w], "in_flight_peak": 1} for w in (1, 2, 4)]
        return trial("whynot", "session_on_writes", "throughput", "x", {
            "kind": "throughput", "reps": 1, "hands_out": False, "backend": rows, "baseline": rows,
            "baseline_backend": "xact", "speedups": mine, "baseline_speedups": [2.0, 2.5]})

    text = whynot.neighbours(frame(queue, different, speed([1.0, 1.1])))
    assert "0 given to two runs" in text and "overwritten by the older run's in 1/2 (held after delete)" in text
    assert "is below xact's 2.00-2.50" in text
    assert text.endswith("Kafka partitioning: not measured: no Kafka server can run here")
    queue["measures"]["duplicates"] = [7]
    different["measures"]["newest_kept"]["after_delete"] = True
    planted = whynot.neighbours(frame(queue, different, speed([2.1, 2.2])))
    assert "1 given to two runs" in planted and "overwritten by the older run's in 0/2" in planted
    assert "is within the noise of xact's" in planted


def test_the_idempotent_trials_read_alike_under_the_old_shared_kind_and_the_kind_of_each_variant():
    """The reference run recorded same_inputs and different_inputs with one kind, 'inputs'; newer runs record
    each variant's own. The report selects whynot trials by variant, so both render the same sentence."""
    recorded = [r for r in RunFolder(ROOT / "results" / "20261201-182949-85a8").trials()
                if r["scenario"] == "whynot" and r["variant"] in ("same_inputs", "different_inputs")
                and r["status"] == "ok"]
    assert {r["measures"]["kind"] for r in recorded} == {"inputs"}
    assert {(r["backend"], r["variant"]) for r in recorded} == {("idempotent", "same_inputs"),
                                                                ("idempotent", "different_inputs")}
    renamed = [{**r, "measures": {**r["measures"], "kind": r["variant"]}} for r in recorded]
    old, new = whynot.neighbours(frame(*recorded)), whynot.neighbours(frame(*renamed))
    assert old == new
    assert "idempotent, same inputs: two overlapping rebuilds left the same 250 rows in 3/3 trials" in old
    assert "idempotent, different inputs (each run's own" in old


def test_the_throughput_line_counts_trials_stopped_as_settled_apart_from_those_at_the_cap():
    rows = [{"workers": w, "per_s": [100.0 * w] * 3, "in_flight_peak": w} for w in (1, 2, 4)]

    def speed(backend, reached, settled, reps):
        precision = {"tolerance": 0.1, "floor": 3, "cap": 8, "repetitions": reps, "reached": reached,
                     "spread": 0.3, **({} if settled is None else {"settled": settled})}
        return {"kind": "throughput", "reps": reps, "hands_out": False, "backend": rows, "baseline": rows,
                "baseline_backend": "xact", "speedups": [2.0] * reps, "baseline_speedups": [2.1] * reps,
                "precision": precision}

    text = whynot._throughput("session", [speed("session", False, True, 3), speed("session", False, False, 8)])
    assert "3/8 by trial" in text and "or once more could not change the verdict" in text
    assert "1 stopped as settled; 1 at the cap" in text
    older = whynot._throughput("session", [speed("session", False, None, 8)])  # recorded before the settled stop
    assert "could not change the verdict" not in older and "1 at the cap" in older
