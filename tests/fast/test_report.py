"""Report rendering from handcrafted trials: published lines beside ours, mismatches flagged."""

import copy

from lab.report import case_lines, published, render

META = {"command": "lab run", "profile": "quick", "started": "2026-01-01T00:00:00Z", "git_commit": "abc",
        "git_dirty": False,
        # What a run records of its backends' declarations (meta.json "capabilities").
        "capabilities": {"xact": ["exclusion", "in_transaction"], "session": ["exclusion", "session_lock"],
                         "session_autocommit": ["exclusion", "session_lock"],
                         "redis": ["exclusion", "lease_expiry"], "etcd_fenced": ["exclusion", "fencing", "lease_expiry"],
                         "redis_fenced": ["exclusion", "fencing", "lease_expiry"],
                         "lease_row": ["exclusion", "fencing", "lease_expiry"]},
        "machine": {"cores": 2, "memory_gib": 24, "platform": "Linux"}, "versions": {"python": "3.11"},
        "services": {"postgres": {"address": "postgresql+psycopg2://postgres@127.0.0.1:5/postgres",
                                  "embedded": True, "version": "18.6"}}}


def case_trial(letter, backend, variant, got_at_5=True, state="idle in transaction", next_query="OperationalError"):
    measures = {"case": letter, "setting": "idle_in_transaction_session_timeout", "timeout_s": 1.0,
                "acquired": True, "holder_state": state,
                "probes": [{"t": 1, "at": 0.33, "got": False}, {"t": 5, "at": 1.67, "got": got_at_5}],
                "held_after": not got_at_5, "next_query": next_query, "release": "released",
                "server_said": None}
    return {"id": f"cases/{backend}/{variant}/0", "scenario": "cases", "backend": backend, "variant": variant,
            "index": 0, "status": "ok", "measures": measures, "verdict": "lost" if got_at_5 else "held"}


def test_case_lines_use_the_posts_format():
    trial = case_trial("A", "session", "idle_in_transaction")
    assert case_lines(trial["measures"]) == published.CASE_LINES["A"]


def test_matching_case_is_marked_match():
    text = render(META, [case_trial("A", "session", "idle_in_transaction")], "run-1")
    assert "| A | default (autobegin) | match (1/1 trials) |" in text
    assert "**(differs)**" not in text


def test_planted_mismatch_is_flagged_line_by_line():
    held_instead = case_trial("A", "session", "idle_in_transaction", got_at_5=False, next_query="alive")
    text = render(META, [held_instead], "run-1")
    assert "MISMATCH (0/1 trials)" in text
    assert "`t=5s other process gets lock: False` **(differs)**" in text


def test_same_faults_matrix_shows_post_cells_beside_ours():
    trials = [case_trial("A", "session", "idle_in_transaction"),
              case_trial("B", "session_autocommit", "idle_in_transaction", got_at_5=False, state="idle",
                         next_query="alive")]
    text = render(META, trials, "run-1")
    assert "lost 1/1 (post: Lost)" in text and "held 1/1 (post: Held)" in text


def test_rendering_is_deterministic_and_ignores_record_order():
    trials = [case_trial("A", "session", "idle_in_transaction"),
              case_trial("D", "session_commit", "query_then_idle_in_transaction")]
    assert render(META, trials, "r") == render(META, list(reversed(copy.deepcopy(trials))), "r")


def test_what_a_run_records_about_its_servers_hides_passwords():
    """meta.json takes the servers from Services.describe(); the report prints versions, not addresses."""
    from lab.servers.clients import parse_pg_dsn
    from lab.servers.services import Services

    described = Services(pg_url=parse_pg_dsn("postgresql://app:s3cret@db:5432/x"),
                         redis_url="redis://:hunter2@cache:6379/0", redlock_urls=["redis://:pw3@a:1/0"],
                         versions={"postgres": "18.6"}).describe()
    assert "s3cret" not in str(described) and "hunter2" not in str(described) and "pw3" not in str(described)
    assert described["postgres"]["address"] == "postgresql+psycopg2://app:***@db:5432/x"
    meta = copy.deepcopy(META)
    meta["services"] = described
    text = render(meta, [case_trial("A", "session", "idle_in_transaction")], "r")
    assert "| server: postgres | 18.6 (external) |" in text and "app" not in text.split("## Provenance")[1]


def overlap_trial(backend, rows_final, deleted2, index=0):
    runs = [{"run": "run1", "outcome": "committed", "waited": 0.0, "deleted": 250, "error": None},
            {"run": "run2", "outcome": "committed", "waited": 0.0, "deleted": deleted2, "error": None}]
    measures = {"isolation": "READ COMMITTED", "rows": 250, "runs": runs, "rows_final": rows_final,
                "rows_seen": [250, rows_final], "runs_in_final": ["run1", "run2"] if rows_final > 250 else ["run2"]}
    return {"id": f"overlap/{backend}/two_runs/{index}", "scenario": "overlap", "backend": backend,
            "variant": "two_runs", "index": index, "status": "ok", "measures": measures,
            "verdict": f"merged ({rows_final} rows)" if rows_final > 250 else f"intact ({rows_final} rows)"}


def test_overlap_prints_the_posts_lines_and_matches_500():
    text = render(META, [overlap_trial("none", 500, 0)], "r")
    assert "| none | READ COMMITTED | 500 (match) | 500 |" in text
    assert "| `run2: committed, waited 0.0s, deleted 0` | `run2: committed, waited 0.0s, deleted 0` |" in text


def test_overlap_flags_a_lock_that_let_two_rebuilds_merge():
    text = render(META, [overlap_trial("xact", 500, 0)], "r")
    assert "| xact | READ COMMITTED | 500 **(MISMATCH)** | 250 |" in text
    assert "`rows afterwards: 500` **(differs)**" in text


def test_conflict_counts_differing_from_the_post_are_flagged():
    trial = {"id": "conflicts/serializable/spread_ids/0", "scenario": "conflicts", "backend": "serializable",
             "variant": "spread_ids", "index": 0, "status": "ok", "verdict": "3 of 8 failed",
             "measures": {"design": "spread_ids", "failed": 3, "of": 8}}
    text = render(META, [trial], "r")
    assert "| index, spread-out ids | 0 of 8 | 3 of 8 | differs: predicate locks follow index pages" in text


def test_timing_trials_get_the_posts_statistics_line_and_a_chart(tmp_path):
    from lab.report.timing import row_stats, stats_line

    s = row_stats([10.19, 14.98, 10.5, 10.9, None], 10.0)
    assert stats_line(s, 10.0) == "4/5 trials overlapped; min 10.19s, max 14.98s; 3 within 1s of the timeout"
    assert stats_line(row_stats([None, None], 10.0), 10.0) == "0/2 trials overlapped"
    assert row_stats([9.5, 10.2], 10.0)["before_timeout"] == 1  # an overlap before the timer is flagged


def test_timing_attempts_follow_the_cron_grid_and_the_event_rate():
    import random

    from scenarios.timing import attempt_times

    cron = attempt_times("cron", 1.0, random.Random(1))
    assert all(abs((b - a) - 5.0) < 1e-9 for a, b in zip(cron, cron[1:])) and cron[0] < 5 and cron[-1] < 30
    events = attempt_times("event", 1.0, random.Random(1))
    assert 15 <= len(events) <= 45 and events == sorted(events)
    assert attempt_times("event", 1.0, random.Random(1)) == events  # seeded: a trial replays the same way


def test_the_timing_chart_renders_and_is_byte_stable(tmp_path):
    from lab.report.charts import timing_chart

    rows = [("cron/default", 10.19, 14.98), ("cron/AUTOCOMMIT", None, None)]
    timing_chart(rows, 10.0, tmp_path / "a.png")
    timing_chart(rows, 10.0, tmp_path / "b.png")
    data = (tmp_path / "a.png").read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 5000
    assert data == (tmp_path / "b.png").read_bytes()


def test_a_matrix_cell_counts_errored_trials_too():
    from lab.report.matrix import cell

    ok = {"status": "ok", "verdict": "stale write rejected", "safety": "safe"}
    accepted = {"status": "ok", "verdict": "stale write accepted", "safety": "unsafe"}
    # Issue 14: the survivors of a partly errored cell are not a result; a failure found still stands.
    assert cell([ok, ok, {"status": "error", "reason": "x"}]) == \
        "incomplete: error 1/3 (x); stale write rejected 2/3, error 1/3"
    # A ✗ states its rate over the trials that finished, with its interval.
    assert cell([accepted, {"status": "error", "reason": "x"}]) == \
        "✗ stale write accepted 1/2, error 1/2 · rate 1/1 (95 %: 2–100 %)"
    assert cell([accepted]) == "✗ stale write accepted 1/1 · rate 1/1 (95 %: 2–100 %)"


def test_provenance_says_when_the_run_started_from_a_changed_checkout():
    clean = render(META, [case_trial("A", "session", "idle_in_transaction")], "run-1")
    assert "| lab commit | abc |" in clean
    dirty = render({**META, "git_dirty": True}, [case_trial("A", "session", "idle_in_transaction")], "run-1")
    assert "| lab commit | abc with uncommitted changes |" in dirty


def test_provenance_of_a_run_that_did_not_record_its_checkout_says_unknown_not_clean():
    trials = [case_trial("A", "session", "idle_in_transaction")]
    for unrecorded in ({k: v for k, v in META.items() if k != "git_dirty"}, {**META, "git_dirty": None}):
        text = render(unrecorded, trials, "run-1")
        assert "| lab commit | abc (uncommitted changes: unknown) |" in text
        assert "| lab commit | abc |" not in text
