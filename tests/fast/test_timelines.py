"""Timelines are recomputed from trials.jsonl alone, and every picture REPORT.md shows is committed beside it."""

import re

from lab.checkers import ops
from lab.report.sections import RunView
from lab.report.timelines import failing_trials, history_of, history_picture
from tests.fast.test_reference_report import ROOT, reference


def test_the_reference_reports_timelines_come_from_its_trials_and_are_committed():
    folders, trials = reference()
    failing = failing_trials(RunView.of(trials, folders[0].meta()))
    assert failing, "the reference runs have failing cells"
    for _, record in failing:  # every one drawn from exactly its recorded history
        assert history_picture(record) is not None
        assert ops.to_json(history_of(record) or []) == record["history"]
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
