"""Report rendering from handcrafted trials: published lines beside ours, mismatches flagged."""

import copy

from lab import published
from lab.report import case_lines, render

META = {"command": "lab run", "profile": "quick", "started": "2026-01-01T00:00:00Z", "git_commit": "abc",
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


def test_provenance_never_shows_a_password():
    meta = copy.deepcopy(META)
    meta["services"]["postgres"]["address"] = "postgresql+psycopg2://app:***@db:5432/x"
    text = render(meta, [case_trial("A", "session", "idle_in_transaction")], "r")
    assert "## Provenance" in text and "18.6 (embedded)" in text
