"""Checkers: each planted violation is caught, and a clean trial passes."""

from lab.checkers.measure_level import (
    company_state,
    detected_within,
)


def test_calibration_within_one_poll():
    assert detected_within(0.049, 0.05) == "within one poll"
    assert detected_within(0.100, 0.05) == "within one poll"


def test_calibration_flags_a_late_or_missing_detection():
    assert detected_within(0.101, 0.05) == "late"
    assert detected_within(None, 0.05) == "not detected"


def test_calibration_blames_the_server_only_for_a_refusal_a_full_poll_after_the_kill():
    # The poller woke 130 ms after the kill (a busy client) and got the lock at once: the server was on time.
    assert detected_within(0.130, 0.05, still_held_at=None) == "within one poll"
    assert detected_within(0.130, 0.05, still_held_at=0.012) == "within one poll"
    # A poll that started 60 ms after the kill still found the lock taken: the server was late.
    assert detected_within(0.090, 0.05, still_held_at=0.060) == "late"
    assert detected_within(None, 0.05, still_held_at=None) == "not detected"


def test_two_runs_rows_in_one_company_are_merged():
    assert company_state(250, 500, ["run1", "run2"]) == "merged (500 rows)"


def test_mixed_runs_are_caught_even_at_the_right_count():
    assert company_state(250, 250, ["run1", "run2"]) == "merged (250 rows)"


def test_missing_rows_are_short_and_one_clean_rebuild_is_intact():
    assert company_state(250, 0, []) == "short (0 rows)"
    assert company_state(250, 250, ["run2"]) == "intact (250 rows)"
