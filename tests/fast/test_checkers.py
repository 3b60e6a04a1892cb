"""Checkers: each planted violation is caught, and a clean trial passes."""

from lab.checkers import detected_within, lock_verdict


def test_contender_getting_the_lock_is_a_loss():
    assert lock_verdict(True, [False, True]) == "lost"


def test_no_contender_getting_it_is_held():
    assert lock_verdict(True, [False, False]) == "held"


def test_a_holder_that_never_acquired_is_not_scored():
    assert lock_verdict(False, [True, True]) == "not acquired"


def test_calibration_within_one_poll():
    assert detected_within(0.049, 0.05) == "within one poll"
    assert detected_within(0.100, 0.05) == "within one poll"


def test_calibration_flags_a_late_or_missing_detection():
    assert detected_within(0.101, 0.05) == "late"
    assert detected_within(None, 0.05) == "not detected"
