"""Timelines are recomputed from trials.jsonl alone, and every picture REPORT.md shows is committed beside it."""

import re

from lab.report.sections import RunView
from lab.checkers import ops
from lab.report.timelines import events_of, failing_trials, history_of, history_picture
from tests.fast.test_reference_report import ROOT, reference


def test_a_lease_trials_timeline_is_its_measured_times():
    record = {"measures": {"fault": "pause", "fault_at": 0.07, "healed_at": 2.38,
                           "holder": {"token": 3, "write": "committed", "write_at": 2.39, "noticed_loss_at": None,
                                      "signals": [{"at": 2.5, "how": "exception", "via": "release()", "text": ""}]},
                           "contender": {"granted_at": 2.3, "in_at": 2.35, "write": "committed", "token": 4}}}
    events = {(e["run"], e["event"]): e["t"] for e in events_of(record)}
    assert events == {("fault", "fault_fired"): 0.07, ("fault", "fault_healed"): 2.38,
                      ("holder", "acquire_granted"): 0.0, ("holder", "told"): 2.5,
                      ("holder", "write_committed"): 2.39, ("contender", "acquire_granted"): 2.3,
                      ("contender", "write_committed"): 2.35}


def test_a_holder_that_was_never_granted_has_no_grant_on_its_lane():
    record = {"measures": {"fault_at": 0.1, "healed_at": 1.0, "holder": {"granted": False, "write": "none"},
                           "contender": {"granted_at": 1.2, "in_at": 1.3, "write": "committed"}}}
    assert ("holder", "acquire_granted") not in {(e["run"], e["event"]) for e in events_of(record)}


def test_the_reference_reports_timelines_come_from_its_trials_and_are_committed():
    folders, trials = reference()
    failing = failing_trials(RunView.of(trials, folders[0].meta()))
    assert failing, "the reference runs have failing cells"
    for _, record in failing:
        if record["scenario"] == "killpoints":  # drawn from exactly the recorded history
            assert history_picture(record) is not None
            assert ops.to_json(history_of(record)) == record["history"]
    gallery = (ROOT / "REPORT-timelines.md").read_text()  # the gallery is an appendix REPORT.md links
    assert "(REPORT-timelines.md)" in (ROOT / "REPORT.md").read_text()
    pictures = re.findall(r"\]\((timelines/[^)]+\.png)\)", gallery)
    assert pictures and all((ROOT / p).is_file() for p in pictures)
    kept = {str(p.relative_to(ROOT)) for p in (ROOT / "timelines").glob("*.png")}
    assert kept == set(pictures)  # and no picture of an older report is left beside them


# Schema 2: a history drawn as intervals, Jepsen's way (lab/report/history_chart.py).
def test_a_history_is_drawn_as_intervals_not_points():
    from lab.report.history_chart import bars_of
    from tests.fast.test_one_verdict_per_behaviour import superseded_pause

    bars, windows, _ = bars_of(superseded_pause(), ttl=1.0)
    by = {(b.lane, b.what): b for b in bars}
    assert windows == [(0.2, 3.0)]  # the fault's strike to its heal, on the trial's clock
    right, lease = by[("holder", "right")], by[("holder", "lease")]
    assert (right.start, lease.end) == (0.0, 1.0) and right.end > 3.0  # held in its belief long past its lease
    write = by[("holder", "write")]
    assert write.start < write.end and write.label == "ok"  # a bar from invoke to completion
    assert by[("contender", "acquire")].start < by[("contender", "acquire")].end


def test_an_operation_that_never_completed_is_open_to_the_end():
    from lab.checkers.ops import F, Op, Type
    from lab.report.history_chart import bars_of

    history = [Op("r0", Type.INVOKE, F.WRITE, 0.1, {"company": 1}), Op("r1", Type.OK, F.OBSERVE, 0.5, {"count": 250})]
    (bar,), _, points = bars_of(history)
    assert (bar.start, bar.end, bar.label) == (0.1, 0.5, "open") and points[0].f is F.OBSERVE
