"""The scorecard: every published figure of the post beside ours, with a verdict computed, never typed.

The committed reference runs give the hand-read values below (REPORT.md's sections and trials.jsonl); a
figure planted into an in-memory copy of their trials must move its row's verdict, and back; every verdict
but *matches* carries the flag.
"""

from __future__ import annotations

import copy

import pytest

from lab.report import published, render
from lab.report.common import FLAG, Verdict
from lab.report.company import section_overlap
from lab.report.scorecard import ScoreRow, scorecard_rows, section_scorecard
from lab.report.sections import RunView
from tests.fast.test_reference_report import REPORT, reference, rendered_reference, table
from tests.fast.test_report import META, case_trial

HEADING = "## Scorecard: the post's figures against ours"


@pytest.fixture(scope="module")
def committed():
    folders, trials = reference()  # the last record of each trial id, as the report counts them
    return folders[0].meta(), trials


@pytest.fixture(scope="module")
def rendered():
    """The committed runs rendered whole, once: the report a reader gets."""
    return rendered_reference()


def scorecard_text(meta: dict, trials: list[dict]) -> str:
    return section_scorecard(RunView.of(trials, meta))


def rows_of(meta: dict, trials: list[dict]) -> dict[str, ScoreRow]:
    return {r.key: r for r in scorecard_rows(RunView.of(trials, meta))}


def planted(trials: list[dict], scenario: str, backend: str, variant: str, change) -> list[dict]:
    """A deep copy of the trials with change(measures, index) applied to one cell's trials."""
    out = copy.deepcopy(trials)
    hit = 0
    for t in out:
        if (t["scenario"], t["backend"], t["variant"]) == (scenario, backend, variant) and t["status"] == "ok":
            change(t["measures"], t["index"])
            hit += 1
    assert hit, (scenario, backend, variant)
    return out


# --- (1) the committed reference runs, against hand-read values ------------------------------------------

def test_the_reference_scorecard_holds_the_hand_read_figures(rendered):
    text = rendered
    assert text == REPORT.read_text()  # the committed REPORT.md carries this very table
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    at = headings.index(HEADING)
    assert headings[at - 1] == "## Changes since the previous reference"
    assert "## Every backend under every family of faults" in headings[:at]  # the summary, before the scorecard
    by_figure = {row[1]: row for row in table(text, HEADING)}
    expect = {  # figure -> (post, ours, verdict), read off REPORT.md's own sections and the trials
        "the same 10 companies, serializable: failed attempts": ("101", "47, 31, 26", f"{FLAG} **differs**"),
        "the same 10 companies, xact: failed attempts": ("0", "0, 0, 0", "matches"),
        "two rebuilds of one company at once, xact: rows afterwards": ("250 rows", "250, 250, 250 rows", "matches"),
        "two rebuilds of one company at once, none: rows afterwards": ("500 rows", "500, 500, 500 rows", "matches"),
        "SERIALIZABLE, 8 different companies at once, index, adjacent ids: failed": ("6 of 8", "6, 6, 6 of 8",
                                                                                     "matches"),
        "timing runs, cron/default: first grant, earliest to latest": ("10.19-14.98 s", "10.36-17.33 s",
                                                                       f"{FLAG} **differs**"),
        "timing runs, event/default: first grants within 1 s of the timeout": ("11 of 20", "11 of 20", "matches"),
        "timing runs, event/AUTOCOMMIT: trials in which a short run got the lock": ("0/20 trials", "0/20 trials",
                                                                                    "matches"),
        "SQLAlchemy version": ("2.0.51", "2.1.9", f"{FLAG} **differs**"),
    }
    for figure, (post, ours, verdict) in expect.items():
        row = by_figure[figure]
        assert (row[2], row[3], row[4]) == (post, ours, verdict), row
    ratio = by_figure["the same 10 companies, SERIALIZABLE against the lock: time ratio"]
    assert ratio[2] == "8.8 s / 5.4 s = 1.63" and ratio[3].startswith("3.28 s / 1.84 s = 1.78")
    assert ratio[4] == "matches"  # the medians within 25%
    lock = by_figure["cost: one transaction per company + xact lock, over one transaction for all companies, no lock"]
    assert lock[2] == "21.8 s / 14.0 s = 1.56" and lock[3].startswith("2.42 (2.10-3.27)")
    assert lock[4] == f"{FLAG} **differs**"  # 2.42 against 1.56: beyond 25%, and no trial within
    per = by_figure["cost: one transaction per company, no lock, over one transaction for all companies, no lock"]
    assert per[3].startswith("2.19 (2.11-2.75)") and per[4] == f"{FLAG} **differs**"
    rr = by_figure["rule 1: the lock under REPEATABLE READ, the waiting run"]
    assert rr[3] == "xact: 3 of 3 trials failed with it, after a median wait of 0.7 s" and rr[4] == "matches"
    for letter in "ABCDE":
        case = next(row for figure, row in by_figure.items() if figure.startswith(f"case {letter},"))
        assert case[3] == "3 of 3 trials printed these lines" and case[4] == "matches", case
    assert "51 figures: 39 match, 9 differ, 0 within noise, 3 not run." in text


def test_the_reference_rows_name_only_figures_the_post_publishes(committed):
    rows = rows_of(*committed)
    assert len(rows) == 51  # keys are unique
    for row in rows.values():
        assert row.post and row.post != "-", row  # every row has the post's value
    assert {r.verdict for r in rows.values()} == set(Verdict) - {Verdict.WITHIN_NOISE}  # the planted tests make it
    not_run = {k for k, r in rows.items() if r.verdict is Verdict.NOT_RUN}
    # No trial measures these: the reference runs netdrop on the default profile only (7200 s keepalives are the
    # full profile's), and no repeatable_read overlap of the no-lock control.
    assert not_run == {"netdrop/60-10-3", "netdrop/7200-75-9", "overlap/none/repeatable_read/rows"}


# --- (2) a planted contradiction moves the verdict, and back ---------------------------------------------

def test_planted_rows_afterwards_for_xact_flip_the_row_and_back(committed):
    meta, trials = committed
    key = "overlap/xact/two_runs/rows"
    assert rows_of(meta, trials)[key].verdict is Verdict.MATCHES

    def merge(m, index):
        if index == 0:
            m["rows_final"] = 500

    merged = planted(trials, "overlap", "xact", "two_runs", merge)
    row = rows_of(meta, merged)[key]
    assert row.verdict is Verdict.DIFFERS and row.ours == "500, 250, 250 rows"
    assert row.verdict_cell() == f"{FLAG} **differs**"
    assert f"| {row.ours} | {FLAG} **differs** |" in scorecard_text(meta, merged)

    def restore(m, index):
        m["rows_final"] = 250

    assert rows_of(meta, planted(merged, "overlap", "xact", "two_runs", restore))[key].verdict is Verdict.MATCHES


def test_planted_perf_seconds_move_a_cost_ratio_between_differs_matches_and_within_noise(committed):
    meta, trials = committed
    key = "perf/per_company_lock/one_transaction_for_all"
    base = {t["index"]: t["measures"]["seconds"] for t in trials
            if t["scenario"] == "perf" and t["variant"] == "one_transaction_for_all" and t["status"] == "ok"}
    post = published.PERF_SECONDS["per_company_lock"] / published.PERF_SECONDS["one_transaction_for_all"]
    assert rows_of(meta, trials)[key].verdict is Verdict.DIFFERS  # 2.42 against 1.56: beyond 25%

    def twice_the_post(m, index):
        m["seconds"] = base[index] * post * 2

    assert rows_of(meta, planted(trials, "perf", "xact", "per_company_lock", twice_the_post))[key].verdict \
        is Verdict.DIFFERS

    def as_post(m, index):
        m["seconds"] = base[index] * post

    row = rows_of(meta, planted(trials, "perf", "xact", "per_company_lock", as_post))[key]
    assert row.verdict is Verdict.MATCHES and row.ours.startswith(f"{post:.2f} ({post:.2f}-{post:.2f})")

    def straddle(m, index):  # 0.6x to 2.9x the post's: the median (1.3x) is not close, yet one lies below
        m["seconds"] = base[index] * post * (0.6, 1.3, 2.9, 1.3, 2.9)[index]

    assert rows_of(meta, planted(trials, "perf", "xact", "per_company_lock", straddle))[key].verdict \
        is Verdict.WITHIN_NOISE


def test_planted_timing_and_retries_follow_the_stated_tolerance(committed):
    meta, trials = committed
    key = "timing/cron/default/range"

    def later(m, index):
        m["first_got_at"] = m["first_got_at"] + 2.0  # beyond one unit (1 s) at both ends

    rows = rows_of(meta, planted(trials, "timing", "session", "cron", later))
    assert rows[key].verdict is Verdict.DIFFERS and rows["timing/cron/default/overlapped"].verdict is Verdict.MATCHES
    assert rows_of(meta, trials)[key].verdict is Verdict.DIFFERS  # 10.36-17.33 s: the latest beyond one unit

    def like_the_posts_ends(m, index):  # each trial's first grant moved into the post's range, within one unit
        m["first_got_at"] = min(max(m["first_got_at"], 10.2), 15.0)

    assert rows_of(meta, planted(trials, "timing", "session", "cron", like_the_posts_ends))[key].verdict \
        is Verdict.MATCHES

    def like_the_post(m, index):
        m["failed_attempts"] = published.TEN_COMPANIES["serializable"][1]

    key = "conflicts/ten/serializable/failed"
    assert rows_of(meta, trials)[key].verdict is Verdict.DIFFERS
    assert rows_of(meta, planted(trials, "conflicts", "serializable", "ten_companies", like_the_post))[key].verdict \
        is Verdict.MATCHES


def test_planted_repeatable_read_error_differs_and_the_overlap_line_counts_the_lock_alone(committed):
    meta, trials = committed

    def other_error(m, index):
        if index == 2:
            m["runs"][1]["error"] = "SerializationFailure: could not serialize access due to concurrent update"

    changed = planted(trials, "overlap", "xact", "repeatable_read", other_error)
    row = rows_of(meta, changed)["rules/repeatable_read"]
    assert row.verdict is Verdict.DIFFERS and row.ours.startswith("xact: 2 of 3 trials failed with it")
    text = section_overlap(RunView.of(changed, meta))
    assert "Rule 1, REPEATABLE READ with the lock (xact): the waiting run failed with *could not serialize access " \
           "due to concurrent delete* in 2 of 3 trials" in text
    # The other locks inside the write, as the reference recorded them (django-pglock's xact=True is xact's method).
    assert "row_lock 0 of 3, row_lock_no_key 0 of 3, unique_backstop 1 of 3, queue 0 of 3, mariadb_row_lock 0 of 3, " \
           "pglock_xact 3 of 3." in text


# --- (3) every verdict but matches is flagged --------------------------------------------------------------

def test_every_verdict_but_matches_is_flagged_in_the_rows_and_in_the_table(committed, rendered):
    meta, trials = committed
    merged = planted(trials, "overlap", "xact", "two_runs", lambda m, i: m.update(rows_final=500))
    for rows in (rows_of(meta, trials), rows_of(meta, merged)):
        for row in rows.values():
            assert row.flagged is (row.verdict is not Verdict.MATCHES)
            assert (FLAG in row.verdict_cell()) is row.flagged, row
            assert row.tolerance, row  # every row states its tolerance
    for text in (rendered, scorecard_text(meta, merged)):
        cells = [row[4] for row in table(text, HEADING)]
        assert cells and all(c == "matches" or c.startswith(f"{FLAG} ") for c in cells)
        assert all(c in ("matches", f"{FLAG} **differs**", f"{FLAG} within noise", f"{FLAG} not run") for c in cells)
        assert all(c != "matches" or FLAG not in c for c in cells)


def test_a_run_lacking_the_trials_says_not_run_flagged_and_a_run_with_none_gets_no_scorecard():
    rows = {r.key: r for r in scorecard_rows(RunView.of([case_trial("A", "session", "idle_in_transaction")], META))}
    assert rows["cases/A"].verdict is Verdict.MATCHES
    assert rows["cases/B"].verdict is Verdict.NOT_RUN and rows["cases/B"].verdict_cell() == f"{FLAG} not run"
    assert rows["perf/workers_8/one_transaction_for_all"].verdict is Verdict.NOT_RUN
    assert rows["setup/python"].verdict is Verdict.DIFFERS  # META's python is 3.11
    pause = {"id": "pause/redis/sigstop/0", "scenario": "pause", "backend": "redis", "variant": "sigstop", "index": 0,
             "status": "ok", "verdict": "held", "measures": {}}
    assert HEADING not in render(META, [pause], "r")


def test_the_conflicts_section_flags_the_retries_the_scorecard_flags(committed):
    from lab.report.costs import section_conflicts

    meta, trials = committed
    text = section_conflicts(RunView.of(trials, meta))
    assert f"| 47, 31, 26 ({FLAG} **differs** from the post's) |" in text
    assert "medians of this run: 1.78 (post: 1.63): matches (the cost table's tolerance, within 25%" in text
    like = planted(trials, "conflicts", "serializable", "ten_companies", lambda m, i: m.update(failed_attempts=101))
    assert "| 101, 101, 101 |" in section_conflicts(RunView.of(like, meta))


def test_the_posts_rows_follow_the_declared_role_not_the_backends_name(committed):
    """A run whose meta.json declares method 4 on a backend named otherwise: the scorecard's kill row is that
    backend's, and the backend named "xact", declaring no role, is not the post's lock any more."""
    meta, trials = committed
    renamed = copy.deepcopy(trials)
    for t in renamed:
        if t["backend"] == "xact":
            t["backend"], t["id"] = "my_lock", t["id"].replace("/xact/", "/my_lock/")
    roles = {"my_lock": "method_4", "session": "method_1", "session_commit": "method_2",
             "session_autocommit": "method_3", "none": "no_lock", "serializable": "serializable"}
    rows = rows_of({**meta, "post_roles": roles}, renamed)
    assert "kill/my_lock" in rows and rows["kill/my_lock"].verdict is Verdict.MATCHES
    assert rows["rules/repeatable_read"].ours.startswith("my_lock:")

    unclaimed = rows_of({**meta, "post_roles": {**roles, "my_lock": None}}, renamed)  # nobody plays method 4
    assert unclaimed["kill/method_4"].verdict is Verdict.NOT_RUN
    assert unclaimed["rules/repeatable_read"].verdict is Verdict.NOT_RUN
