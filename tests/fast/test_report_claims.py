"""Every sentence of the report that judges (kept whole, not exercised, cheapest, matches, differs) is computed:
each test plants a figure that contradicts the sentence and sees the sentence change."""

import matplotlib.image

from lab.checkers.outcomes import RunOrder, Safety, exercised_of, lock_lost, safety_of
from lab.report import published, render
from lab.report.common import trials_frame
from lab.report.declared import measured_of
from lab.report.decide import cost_sentence, section_comparison, section_decide
from lab.report.matrix import cell, section_why_not_leases
from lab.report.matrix_split import section_matrix
from lab.report.sections import RunView
from lab.report.summary import _heartbeat, _perf_ratio, _timing_range
from tests.fast.test_report import META


# What a run records beside the words these tests plant: the report reads a trial's typed `safety` and, for a
# lost lock, the checkers' judgement, never the words. A planted finished trial carries what a run would have
# written beside them (unsafe for these, safe otherwise) unless the test plants its own.
PLANTED_UNSAFE = {"stale write accepted", "lost", "late", "not detected", "within one poll", "7 of 8 failed"}
PLANTED_LOST = {"lost", "late", "not detected", "within one poll"}  # the checkers found another run in


def trial(scenario, backend, variant, verdict, measures=None, index=0, status="ok", **top):
    if status == "ok" and verdict is not None:
        top.setdefault("safety", "unsafe" if verdict in PLANTED_UNSAFE else "safe")
        if verdict in PLANTED_LOST and "judgement" not in top:
            top.update(schema=2, judgement={"lock": "false", "safety": top["safety"], "findings": []})
    return {"id": f"{scenario}/{backend}/{variant}/{index}", "scenario": scenario, "backend": backend,
            "variant": variant, "index": index, "status": status, "verdict": verdict,
            "measures": measures or {}, "measured": measured_of({}).get(scenario), **top}


def untyped(record):
    """A planted record as a run that wrote no typed fields would have left it: its words only."""
    return {k: v for k, v in record.items() if k not in ("safety", "schema", "judgement")}


def lease(scenario, backend, verdict, index=0, **top):
    variant = {"pause": "sigstop", "cut": "blackhole", "restart": "server_restart"}[scenario]
    measures = {"fault_at": 0.0, "point": "after_delete", "lost": verdict != "held",
                "holder": {"write": "committed", "write_at": 1.0, "release": "released", "token": 1},
                "contender": {"granted_at": None, "token": 2}}
    return trial(scenario, backend, variant, verdict, measures, index, **top)


# --- the typed vocabulary ---------------------------------------------------------------------------------

def test_safety_is_read_from_the_record_and_never_from_its_words():
    assert safety_of(trial("pause", "redis", "sigstop", "held", safety="unsafe")) is Safety.UNSAFE
    assert safety_of(trial("pause", "redis", "sigstop", "stale write accepted", safety="safe")) is Safety.SAFE
    assert safety_of(trial("pause", "redis", "sigstop", "stale write rejected")) is Safety.SAFE
    # Words that read as a violation say nothing without the typed field: unknown, never guessed.
    assert safety_of(untyped(trial("pause", "redis", "sigstop", "stale write accepted"))) is Safety.UNKNOWN
    assert safety_of(untyped(trial("calibrate", "session", "terminate", "late"))) is Safety.UNKNOWN
    assert lock_lost(trial("cases", "session", "x", "lost")) is True
    assert lock_lost(untyped(trial("cases", "session", "x", "lost"))) is False
    assert safety_of(trial("pause", "redis", "sigstop", None)) is Safety.UNKNOWN
    assert exercised_of(trial("pause", "redis", "sigstop", "held")) is None
    assert exercised_of(trial("pause", "redis", "sigstop", "held", exercised=False)) is False
    assert exercised_of(trial("killpoints", "xact", "search", "x", {"struck": 0})) is False


# --- the matrix -------------------------------------------------------------------------------------------

def test_a_cell_is_a_pass_only_when_the_fault_took_the_lock_away():
    held = [lease("restart", "etcd_fenced", "held", i, exercised=True) for i in range(2)]
    assert cell(held) == "✓ held 2/2 · ≤78%"  # with the 95 % bound of its failure rate (lab/report/strength.py)
    never = [lease("restart", "etcd_fenced", "held", i, exercised=False) for i in range(2)]
    assert cell(never) == "○ not exercised: held 2/2"
    assert cell([held[0], never[1]]) == "✓ held 2/2, 1/2 exercised · ≤95%"  # the bound counts exercised trials
    assert cell([lease("restart", "etcd_fenced", "held")]) == "✓ held 1/1 · ≤95%"  # older run: not claimed, see legend
    planted = [never[0], lease("restart", "etcd_fenced", "held", 1, exercised=True, safety="unsafe")]
    assert cell(planted).startswith("✗ held 2/2")  # the checker's safety beats the verdict's wording


def test_calibration_late_or_never_detected_is_a_failure_not_a_pass():
    within = trial("calibrate", "session", "terminate", "within one poll")
    rate = " · rate 1/1 (95 %: 2–100 %)"  # a ✗ states its rate with its interval
    assert cell([within]) == "✗ lost within one poll 1/1" + rate
    assert cell([trial("calibrate", "session", "terminate", "late")]) == "✗ lost, detected late 1/1" + rate
    assert cell([trial("calibrate", "session", "terminate", "not detected")]) == "✗ lost, never detected 1/1" + rate


def test_the_matrix_legend_says_when_exercised_was_not_recorded_and_the_chart_colours_not_exercised(tmp_path):
    charts = {}
    recorded = section_matrix(RunView.of([lease("restart", "etcd_fenced", "held", exercised=False)], charts=charts))
    assert "○ not exercised: held 1/1" in recorded and "did not record whether" not in recorded
    assert "light blue-grey not exercised" in recorded
    charts["matrix.png"](tmp_path / "m.png")
    pixels = matplotlib.image.imread(tmp_path / "m.png")[:, :, :3].reshape(-1, 3)
    blue_grey = [0xb0 / 255, 0xc4 / 255, 0xde / 255]
    assert any(abs(p - blue_grey).max() < 0.02 for p in pixels)
    assert not any(abs(p - [0x2e / 255, 0x7d / 255, 0x32 / 255]).max() < 0.02 for p in pixels)  # no green
    old = section_matrix(RunView.of([lease("restart", "etcd_fenced", "held")]))
    assert "1 of the trials behind ✓ cells come from runs that did not record whether" in old


def test_backends_follow_the_runs_order_and_leases_are_chosen_by_capability():
    trials = [lease("pause", "redis", "stale write accepted"), lease("pause", "xact", "rolled back")]
    meta = {"backend_order": ["xact", "redis"], "capabilities": {"xact": ["lease_expiry"], "redis": ["exclusion"]}}
    view = RunView.of(trials, meta)
    matrix = section_matrix(view)
    assert matrix.index("| xact |") < matrix.index("| redis |")
    leases = section_why_not_leases(view)
    assert "| xact |" in leases and "| redis |" not in leases
    # A run whose meta.json declares nothing: today's registry is not asked, so no backend is a lease.
    assert section_why_not_leases(RunView.of(trials)) is None
    assert RunOrder.of({}).backend_key("redis") < RunOrder.of({}).backend_key("xact")  # by name


# --- the decision page ------------------------------------------------------------------------------------

DECLARED = {"capabilities": {"etcd_fenced": ["exclusion", "fencing", "lease_expiry"], "xact": ["exclusion", "in_transaction"],
                             "session_autocommit": ["exclusion", "session_lock"]},
            "lock_service": {"etcd_fenced": "etcd", "xact": "postgres", "session_autocommit": "postgres"},
            "summaries": {"etcd_fenced": "etcd lock + revision as fencing token"}}


def test_the_decision_page_counts_only_exercised_faults_and_a_planted_failure_moves_a_lock_to_do_not_use():
    trials = [lease("pause", "etcd_fenced", "stale write rejected", exercised=True),
              lease("cut", "etcd_fenced", "stale write rejected", exercised=True),
              lease("restart", "etcd_fenced", "held", exercised=False)]
    run = RunView.of(trials, DECLARED)
    text = section_decide(run)
    assert ("- `etcd_fenced`: etcd lock + revision as fencing token. kept 2 · failed 0 · store 0 · unaffected 0 · "
            "not exercised 1 · unknown 0 · n/a 0; weakest deciding ✓ *") in section_comparison(run)
    assert "| a lock service you run (1 candidate," in text and "Do not use" not in text
    assert "| `etcd_fenced` |" in text
    planted = trials[:2] + [lease("restart", "etcd_fenced", "stale write accepted", exercised=True)]
    text = section_decide(RunView.of(planted, DECLARED))
    assert "| `etcd_fenced` |" not in text and "none qualifies" in text and "**Do not use** 1 lock" in text
    assert "- *lock server restarted* (stale write accepted 1/1): `etcd_fenced`." in \
        section_comparison(RunView.of(planted, DECLARED))
    # An older run that never recorded whether a fault took the right away: nothing is claimed as exercised.
    older = [{k: v for k, v in t.items() if k != "exercised"} for t in trials]
    assert "| `etcd_fenced` |" not in section_decide(RunView.of(older, DECLARED))


def test_a_need_is_chosen_by_declaration_and_left_out_when_no_lock_can_serve_it():
    text = section_decide(RunView.of([lease("pause", "xact", "rolled back", exercised=True)], DECLARED))
    assert "| every write in PostgreSQL (1 candidate," in text and "| `xact` |" in text
    assert "lock service" not in text and "run-level lock" not in text  # xact serves neither


def _perf_trial(backend, variant, seconds, index=0):
    return trial("perf", backend, variant, "measured", {"workers": 1, "companies": 1000, "transactions": 1000,
                                                        "failed": 0, "seconds": seconds, "config": variant}, index)


def test_the_decision_page_states_the_cost_per_company_and_a_planted_figure_changes_it():
    trials = [lease("pause", "xact", "rolled back", exercised=True),
              _perf_trial("none", "transaction_per_company", 1.5), _perf_trial("xact", "per_company_lock", 1.7)]
    meta = {**DECLARED, "post_roles": {"none": "no_lock"}}
    text = section_decide(RunView.of(trials, meta))
    assert "| 1.70 ms a company (1.70–1.70, 1 repetition) |" in text
    planted = trials[:2] + [_perf_trial("xact", "per_company_lock", 2.4)]
    assert "| 2.40 ms a company (2.40–2.40, 1 repetition) |" in section_decide(RunView.of(planted, meta))
    # A run-level lock is priced per run, and a fenced one's per-company fence is said to be untimed.
    run_level = [lease("pause", "etcd_fenced", "stale write rejected", exercised=True), *trials[1:]]
    assert ("once per run, acquire + release not measured here; per company, a fence upsert in each company's "
            "transaction, not measured here") == cost_sentence(RunView.of(run_level, meta).frame, meta, "etcd_fenced")
    assert "| `etcd_fenced` | fewest services |" not in section_decide(RunView.of(run_level, meta))


def test_do_not_use_counts_a_lock_lost_with_no_write_to_judge_as_a_failure():
    trials = [lease("pause", "session_autocommit", "held", exercised=False),
              trial("cases", "session_autocommit", "idle_session", "lost", safety="untested", exercised=True)]
    text = section_comparison(RunView.of(trials, DECLARED))
    assert "- *idle_session_timeout* (lost 1/1): `session_autocommit`." in text.split("### Do not use", 1)[1]


# --- why not just...? -------------------------------------------------------------------------------------

def perf(variant, seconds):
    return [trial("perf", "xact", variant, "completed", {"seconds": s, "config": variant, "companies": 10,
                                                           "rows": 100}, i) for i, s in enumerate(seconds)]


def test_one_giant_transaction_is_called_cheapest_only_beyond_the_noise():
    base = perf("one_transaction_for_all", [1.0, 1.1, 1.2])
    text = _perf_ratio(trials_frame(base + perf("per_company_lock", [2.0, 2.1, 2.2])))
    assert text.startswith("measured: cheapest, 1.10 s (1.00-1.20, n=3) against a transaction and lock per "
                           "company 2.10 s")
    faster = _perf_ratio(trials_frame(base + perf("per_company_lock", [2.0, 2.1, 2.2])
                                      + perf("workers_8", [0.5, 0.55, 0.6])))
    assert "cheapest," not in faster and "faster here: 8 workers 0.55 s" in faster
    assert "not the cheapest here" in faster
    noisy = _perf_ratio(trials_frame(base + perf("batch_50_sorted", [1.05, 1.15, 1.3])))
    assert "tied for cheapest within the noise" in noisy and "not the cheapest" not in noisy
    assert "within noise: 50 companies per transaction 1.15 s" in noisy
    assert "below the other's fastest repetition" in noisy  # the tolerance is stated


def test_the_cost_table_says_close_or_differs_against_the_posts_ratio():
    ratio = published.PERF_SECONDS["per_company_lock"] / published.PERF_SECONDS["one_transaction_for_all"]
    base = perf("one_transaction_for_all", [1.0])
    close = render(META, base + perf("per_company_lock", [ratio]), "r")
    assert "| 1.56 | close |" in close and "within 25% of the post's" in close
    far = render(META, base + perf("per_company_lock", [ratio * 2]), "r")
    assert "| 3.11 | differs: machine, disk and scale |" in far


def timing(backend, trigger, firsts, timeout=10.0, handover=None):
    return [trial("timing", backend, trigger, "overlapped" if f is not None else "no overlap",
                  {"timeout_s": timeout, "first_got_at": f, "handover": handover if f is not None else None}, i)
            for i, f in enumerate(firsts)]


def test_raising_the_timeout_says_whether_any_overlap_came_before_it():
    assert "every overlap came after it" in _timing_range(trials_frame(timing("session", "cron", [10.5, 11.0])))
    assert "1 of 2 overlaps came before it" in _timing_range(trials_frame(timing("session", "cron", [9.5, 11.0])))


def test_the_heartbeat_row_says_lost_only_when_the_trials_lost():
    lost = trial("cases", "session_commit", "query_then_idle_in_transaction", "lost")
    assert "the lock is lost again: session_commit lost 1/1" in _heartbeat(trials_frame([lost]))
    held = trial("cases", "session_commit", "query_then_idle_in_transaction", "held")
    assert "did not lose the lock here: session_commit held 1/1" in _heartbeat(trials_frame([held]))


# --- timing against the post ------------------------------------------------------------------------------

def posts_firsts(scale=1.0):
    """20 first overlaps with the post's session/cron figures: min 10.19, max 14.98, 4 within 1 s."""
    return [round(f * scale, 3) for f in [10.19, 10.5, 10.8, 10.9] + [12.0] * 15 + [14.98]]


def timing_row(text, label):
    return next(line for line in text.splitlines() if line.startswith(f"| {label} |"))


def test_timing_rows_compare_every_figure_with_the_posts_within_the_stated_tolerance():
    same = render(META, timing("session", "cron", posts_firsts()), "r")
    assert timing_row(same, "cron/default").endswith("| matches the post |")
    assert "min and max agree when within one unit (timeout / 10 = 1 s" in same
    scaled = render(META, timing("session", "cron", posts_firsts(0.1), timeout=1.0), "r")
    assert timing_row(scaled, "cron/default").endswith("| matches the post |")  # the post's seconds, scaled
    later = [f + 2.0 for f in posts_firsts()]
    row = timing_row(render(META, timing("session", "cron", later), "r"), "cron/default")
    assert "**differs from the post**: min 12.19s vs 10.19s; max 16.98s vs 14.98s" in row
    spread = [11.1] + [11.5] * 18 + [14.98]  # min within 1 s, but none within 1 s of the timeout: 0/20 vs 4/20
    row = timing_row(render(META, timing("session", "cron", spread), "r"), "cron/default")
    assert "within 1s of the timeout 0/20 vs 4/20" in row and "min " not in row.split("differs")[1]
    fewer = posts_firsts()[:19] + [None]
    row = timing_row(render(META, timing("session", "cron", fewer), "r"), "cron/default")
    assert "overlapped 19/20 vs 20/20" in row


def test_timing_overlaps_are_split_by_handover_and_coloured_so():
    from lab.checkers.outcomes import handover_of
    from lab.report.timing import chart_kind, row_stats

    safe = render(META, timing("xact", "cron", [10.1, 10.4], handover="safe"), "r")
    assert "2 handed over after the holder's transaction ended; its work rolled back" in timing_row(safe, "cron/xact")
    assert "unsafe" not in timing_row(safe, "cron/xact")
    unsafe = timing("xact", "cron", [10.1, 10.4], handover="safe")
    unsafe[1]["measures"]["handover"] = "unsafe"
    row = timing_row(render(META, unsafe, "r"), "cron/xact")
    assert "**1 unsafe**: another run got in while the holder still believed it held" in row
    stats = row_stats([10.1, 10.4], 10.0, [handover_of(t["measures"]) for t in unsafe])
    assert chart_kind(stats) == "unsafe"
    assert chart_kind(row_stats([10.1], 10.0, [Safety.SAFE])) == "safe"
    older = timing("session", "cron", [10.1])
    del older[0]["measures"]["handover"]
    assert "handover not recorded for 1" in timing_row(render(META, older, "r"), "cron/default")


# --- calibration against the post -------------------------------------------------------------------------

def calibration(gaps, kill=2.004):
    out = []
    for i, gap in enumerate(gaps):
        got = None if gap is None else round(kill + gap, 4)
        verdict = "not detected" if gap is None else ("within one poll" if gap <= 0.1 else "late")
        judgement = {"lock": "false", "safety": "unsafe", "findings": [], "figures": {"detection": verdict}}
        out.append(trial("calibrate", "session_autocommit", "terminate", verdict,
                         {"poll": 0.05, "kill_at": 2.0, "killed_at": kill, "got_at": got, "gap": gap}, i,
                         schema=2, judgement=judgement))
    return out


def test_calibration_shows_the_measured_kill_and_can_differ_from_the_post():
    same = render(META, calibration([0.01, 0.02, 0.03, 0.04, 0.05]), "r")
    assert "| 0 | 2.00s, 2.008s (0.008s) | 2.004s, 2.014s (0.010s) | within one poll |" in same
    assert "5 of 5 of ours: matches the post (tolerance: a run is within one poll when its gap is at most two " \
           "polls, 0.10 s" in same
    late = render(META, calibration([0.01, 0.02, 0.30, 0.04, None]), "r")
    assert "| 2 | 2.00s, 2.006s (0.006s) | 2.004s, 2.304s (0.300s) | **late** (differs) |" in late
    assert "| 4 | 2.00s, 2.004s (0.004s) | 2.004s, never | **never detected** (differs) |" in late
    assert "3 of 5 of ours: **differs from the post**" in late
    assert "within one poll in 3 of 5 runs; **late** in 1; **never detected** in 1." in late
    assert "✗ lost within one poll 3/5, lost, detected late 1/5, lost, never detected 1/5" in section_matrix(
        RunView.of(calibration([0.01, 0.02, 0.30, 0.04, None]), META))


# --- the post's other comparisons -------------------------------------------------------------------------

def test_a_lookalike_the_post_got_wrong_here_is_counted_against_it():
    measures = {"timeout_s": 3.0, "held_after_close": False, "other_got_lock_after_close": True,
                "other_got_lock_after_invalidate": True}
    agrees = render(META, [trial("lookalikes", "session", "close_keeps_lock", "as the post says", measures)], "r")
    assert "| 1/1 as the post says;" in agrees
    planted = render(META, [trial("lookalikes", "session", "close_keeps_lock", "differs", measures)], "r")
    assert "| 0/1 as the post says;" in planted


def kill_trial(waited, rows_seen):
    runs = [{"run": "run1", "outcome": "failed", "waited": 0.0, "deleted": None, "error": "OperationalError: x"},
            {"run": "run2", "outcome": "committed", "waited": waited, "deleted": 250, "error": None}]
    return trial("kill", "xact", "after_delete", "intact (250 rows)",
                 {"holder_error": "OperationalError: x", "runs": runs, "rows_seen": rows_seen, "rows_final": 250})


def test_the_kill_test_lines_differ_only_on_a_planted_figure():
    same = render(META, [kill_trial(0.4, [250])], "r")
    assert "**(differs)**" not in same.split("## A run killed")[1].split("\n## ")[0]
    torn = render(META, [kill_trial(0.4, [0, 250])], "r")
    assert "`row counts the observer ever saw: [0, 250]; final rows: 250` **(differs)**" in torn


def test_conflict_counts_equal_to_the_posts_match():
    planted = trial("conflicts", "serializable", "no_index", "7 of 8 failed", {"failed": 7, "of": 8})
    assert "| no index | 7 of 8 | 7 of 8 | match |" in render(META, [planted], "r")


def test_a_matching_overlap_count_says_match_and_a_planted_one_mismatch():
    from tests.fast.test_report import overlap_trial

    assert "| serializable | READ COMMITTED | 250 (match) | 250 |" in render(
        META, [overlap_trial("serializable", 250, 250)], "r")
    assert "| serializable | READ COMMITTED | 500 **(MISMATCH)** | 250 |" in render(
        META, [overlap_trial("serializable", 500, 0)], "r")


# --- kill points, writes of unknown outcome, merged order ---------------------------------------------------

def search(struck, tried=12):
    return trial("killpoints", "xact", "search", f"{struck} schedules struck, none failed",
                 {"minimal": None, "tried": tried, "struck": struck, "not_struck": tried - struck, "seconds": 5.0})


def test_a_kill_point_search_whose_faults_never_struck_is_not_a_pass():
    struck = render(META, [search(12)], "r")
    assert "| xact | 12 of 12 schedules struck, none failed | - | 5 s |" in struck
    # each schedule that struck is a trial: 12, none failed, ≤22 %
    assert "| ✓ 12 schedules struck, none failed 1/1 · ≤22% |" in section_matrix(RunView.of([search(12)], META))
    never = render(META, [search(0)], "r")
    assert "| xact | ○ not exercised: none of 12 schedules struck its target |" in never
    assert "| ○ not exercised: 0 schedules struck, none failed 1/1 |" in section_matrix(RunView.of([search(0)], META))


def test_a_write_whose_commit_result_is_unknown_is_printed_as_such():
    from lab.report.company import run_line

    line = run_line({"run": "run2", "outcome": "indeterminate", "waited": 0.25, "deleted": None, "error": None})
    assert line == "run2: indeterminate (commit result unknown), waited 0.2s"


def test_merged_runs_keep_their_order_only_when_every_run_recorded_it():
    from lab.report import _merged_order

    merged = _merged_order([{"backend_order": ["xact", "session"], "capabilities": {"xact": ["a"]}},
                            {"backend_order": ["redis", "xact"], "capabilities": {"xact": ["b"]}}])
    assert merged == {"backend_order": ["xact", "session", "redis"], "capabilities": {"xact": ["b"]}}
    assert "backend_order" not in _merged_order([{"backend_order": ["xact"]}, {}])


def test_a_timing_row_with_errored_trials_says_incomplete_not_its_survivors():
    trials = timing("session", "cron", [10.2, 10.4, 10.9])
    trials[2] = {**trials[2], "status": "error", "reason": "remaining connection slots are reserved",
                 "measures": None, "verdict": None}
    row = timing_row(render(META, trials, "r"), "cron/default")
    assert "incomplete: 1 of 3 trials errored (remaining connection slots are reserved)" in row
    assert "overlapped" not in row


def test_a_cost_row_whose_repetitions_straddle_the_posts_ratio_gets_no_verdict():
    ratio = published.PERF_SECONDS["per_company_lock"] / published.PERF_SECONDS["one_transaction_for_all"]
    base = perf("one_transaction_for_all", [1.0, 1.0, 1.0])
    # Paired per repetition: 0.6x, 1.3x and 2.9x the post's ratio. The median is 1.3x (not close), yet one
    # repetition lies below the post's: the spread is wider than the difference it would claim.
    planted = render(META, base + perf("per_company_lock", [ratio * 0.6, ratio * 1.3, ratio * 2.9]), "r")
    assert "within noise: ours spans 0.93-4.52, no verdict" in planted
    assert "| differs" not in planted
    # Paired ratios, not ratios of medians: a baseline that drifted with its repetition cancels out.
    drifting = render(META, perf("one_transaction_for_all", [1.0, 2.0, 3.0])
                      + perf("per_company_lock", [ratio, 2 * ratio, 3 * ratio]), "r")
    assert f"| {ratio:.2f} ({ratio:.2f}-{ratio:.2f}) | close |" in drifting


# --- schema 2: a lost lock with no write to judge ---------------------------------------------------------

def test_a_lost_lock_with_no_write_is_its_own_mark_and_keeps_a_lock_off_the_decision_page():
    cases = trial("cases", "session_autocommit", "idle_session", "lost", {"case": "E"}, safety="untested",
                  exercised=True, schema=2, judgement={"kind": "lost", "lock": "false", "safety": "untested"})
    assert cell([cases]) == "⚠ lost 1/1"
    whole = [lease("pause", "session_autocommit", "held", exercised=True)]
    assert "- `session_autocommit`" in section_decide(RunView.of(whole, DECLARED))
    text = section_decide(RunView.of(whole + [cases], DECLARED))
    assert "use `session_autocommit`" not in text  # a lock lost while its holder believed it held is a failure
    assert "- *idle_session_timeout* (lost 1/1): `session_autocommit`." in \
        section_comparison(RunView.of(whole + [cases], DECLARED)).split("### Do not use", 1)[1]
    matrix = section_matrix(RunView.of(whole + [cases]))
    assert "⚠ *lost*" in matrix and "⚠ *lost*" not in section_matrix(RunView.of(whole))  # a legend only when shown


def test_why_not_quotes_each_rows_first_finding_and_links_the_rest():
    from lab.report.summary import anchor, lead

    assert lead("measured: a (b; c) took 1 s; d took 2 s") == "a (b; c) took 1 s …"  # a ';' in brackets stays
    assert lead("measured: all of it") == "all of it"
    long = "measured: " + ", ".join(f"figure {i}" for i in range(80))
    assert len(lead(long)) <= 282 and lead(long).endswith(" …")
    assert anchor("SET x = 0, on a role") == "set-x--0-on-a-role"


def test_the_matrix_gives_each_family_a_table_with_only_the_columns_its_rows_ran():
    """A section per family of faults, in it a table per family of locks with only the columns its rows ran; a
    family of locks with nothing to say under a family of faults is named, not printed."""
    trials = [lease("pause", "xact", "rolled back", exercised=True),
              lease("pause", "etcd_fenced", "stale write rejected", exercised=True),
              lease("restart", "etcd_fenced", "held", exercised=False),
              trial("restart", "xact", "server_restart", "", status="skipped", reason="n/a here")]
    matrix = section_matrix(RunView.of(trials, DECLARED))
    pauses, restarts = matrix.split("## Pauses", 1)[1].split("## Restarts", 1)
    inside, lease_table = pauses.split("### Locks inside the write transaction, and no lock", 1)[1].split(
        "### Lease services", 1)
    assert "| backend | holder paused past the TTL |\n| --- |" not in inside
    assert "| backend | holder paused past the TTL |\n" in inside and "lock server restarted" not in inside
    assert "| backend | holder paused past the TTL |\n" in lease_table
    assert "### Locks inside" not in restarts and "| backend | lock server restarted |\n" in restarts
    assert "Not shown, n/a or not run under every fault here: Locks inside the write transaction, and no lock." \
        in restarts