"""Report files: byte-identical on re-render (charts included), and --compare on two saved runs."""

import json

from lab.report import write_report
from lab.report.compare import compare
from tests.fast.planted import saved_run
from tests.fast.test_report import META, case_trial, overlap_trial


def timing_trial(backend, trigger, first, index):
    return {"id": f"timing/{backend}/{trigger}/{index}", "scenario": "timing", "backend": backend,
            "variant": trigger, "index": index, "status": "ok",
            "verdict": "overlapped" if first else "no overlap",
            "measures": {"trigger": trigger, "timeout_s": 10.0, "window_s": 30.0, "seed": "s", "attempts": 3,
                         "first_got_at": first, "holder_state_at_end": None}}


def make_run(root, name, trials):
    return saved_run(root / name, META, trials)


def test_rerendering_a_run_gives_the_same_bytes_charts_included(tmp_path):
    trials = [case_trial("A", "session", "idle_in_transaction"), overlap_trial("none", 500, 0),
              timing_trial("session", "cron", 10.4, 0), timing_trial("session_autocommit", "cron", None, 0)]
    folder = make_run(tmp_path, "run-1", trials)
    first = {}
    for attempt in ("a", "b"):
        out = tmp_path / attempt / "REPORT.md"
        write_report(folder, out)
        files = {str(p.relative_to(out.parent)): p.read_bytes() for p in out.parent.rglob("*") if p.is_file()}
        assert {"REPORT.md", "timing.png", "matrix.png"} <= set(files)
        if first:
            assert files == first
        first = files


def test_compare_lists_changed_findings_and_ignores_trial_counts(tmp_path):
    lost = case_trial("A", "session", "idle_in_transaction")
    held = json.loads(json.dumps(lost))
    held["verdict"] = "held"
    more = [json.loads(json.dumps(lost)) for _ in range(3)]
    for i, trial in enumerate(more):
        trial["index"], trial["id"] = i, f"cases/session/idle_in_transaction/{i}"
    a = make_run(tmp_path, "a", [lost])
    assert "0 outcomes differ" in compare(a, make_run(tmp_path, "b", more))  # lost 1/1 vs lost 3/3
    text = compare(a, make_run(tmp_path, "c", [held]))
    assert "1 outcomes differ" in text and "| cases | session | idle_in_transaction | lost 1/1 | held 1/1 |" in text


def test_several_runs_merge_with_the_later_trial_winning(tmp_path):
    lost = case_trial("A", "session", "idle_in_transaction")
    held = json.loads(json.dumps(lost))
    held["verdict"] = "held"
    first, second = make_run(tmp_path, "r1", [lost]), make_run(tmp_path, "r2", [held])
    out = tmp_path / "merged" / "REPORT.md"
    write_report([first, second], out)
    text = out.read_text()
    outcomes = (out.parent / "REPORT-outcomes.md").read_text()  # every outcome: an appendix of its own
    assert "| cases | session | idle_in_transaction | A | held 1/1 |" in outcomes
    assert "[every outcome of this run" in text and "(REPORT-outcomes.md)" in text
    assert "| run | r1 + r2 |" in text and "| merged with | r2: `lab run` at commit abc |" in text


def test_compare_counts_safety_flips_apart_from_changed_words(tmp_path):
    lost = {**case_trial("A", "session", "idle_in_transaction"), "verdict": "stale write accepted", "safety": "unsafe"}
    reworded = {**lost, "verdict": "lost, in other words"}
    held = {**lost, "verdict": "held", "safety": "safe"}
    a = make_run(tmp_path, "a", [lost])
    text = compare(a, make_run(tmp_path, "b", [reworded]))
    assert "1 outcomes differ" in text and "0 safety verdicts flipped" in text
    text = compare(a, make_run(tmp_path, "c", [held]))
    assert "1 safety verdicts flipped" in text and "| cases | session | idle_in_transaction | unsafe | safe |" in text
    # Held because the fault never took the lock away: a difference in words, not a flip.
    text = compare(a, make_run(tmp_path, "d", [{**held, "exercised": False}]))
    assert "1 outcomes differ" in text and "0 safety verdicts flipped" in text
    assert "1 safety verdicts flipped" in compare(a, make_run(tmp_path, "e", [{**held, "exercised": True}]))
    # Lost with nothing written after it (untested), or indeterminate (unknown): no verdict to contradict.
    for name, verdict, decided_nothing in (("f", "lost", "untested"), ("g", "lost, holder write indeterminate", "unknown")):
        text = compare(a, make_run(tmp_path, name, [{**lost, "verdict": verdict, "safety": decided_nothing}]))
        assert "1 outcomes differ" in text and "0 safety verdicts flipped" in text


def perf_trial(variant, index, seconds):
    return {"id": f"perf/none/{variant}/{index}", "scenario": "perf", "backend": "none", "variant": variant,
            "index": index, "status": "ok", "verdict": "completed", "safety": "safe", "measures": {"seconds": seconds}}


def test_compare_says_whether_a_repeated_figure_moved_within_its_tolerance(tmp_path):
    def run(name, ratio):
        return make_run(tmp_path, name, [t for i in range(3) for t in
                                         (perf_trial("one_transaction_for_all", i, 1.0),
                                          perf_trial("transaction_per_company", i, ratio))])
    a = run("a", 2.0)
    assert "| perf transaction_per_company / one_transaction_for_all | 2.000 | 2.100 | +5.0% | +-10% | within |" in \
        compare(a, run("b", 2.1))
    assert "| +25.0% | +-10% | beyond |" in compare(a, run("c", 2.5))


def test_a_figure_measured_less_precisely_is_held_to_its_own_spread_not_to_the_rules(tmp_path):
    """A figure whose repetitions stopped wide (at the cap, or settled) moved within its spread: within, and the
    row says which tolerance it was held to; the same move beyond that spread is still beyond."""
    def run(name, ratios):
        return make_run(tmp_path, name, [t for i, r in enumerate(ratios) for t in
                                         (perf_trial("one_transaction_for_all", i, 1.0),
                                          perf_trial("transaction_per_company", i, r))])
    wide = run("wide", [1.4, 2.0, 2.6])  # +-30% of its median
    assert "| 2.000 | 2.500 | +25.0% | +-30% (spread) | within |" in compare(wide, run("tight", [2.5, 2.5, 2.5]))
    assert "| 2.000 | 2.800 | +40.0% | +-30% (spread) | beyond |" in compare(wide, run("far", [2.8, 2.8, 2.8]))
