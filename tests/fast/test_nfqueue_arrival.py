"""A held packet's arrival is on the monotonic clock: the kernel's wall-clock stamp counts only as an age at the read,
so a step of the host's wall clock (28 s seen on this machine kind) cannot shorten or stretch a hold."""

import pytest

from lab.servers.nfqueue import arrival


def test_a_stamp_is_an_age_at_the_read():
    arrived, stamped = arrival(1000.0 - 0.02, 1000.0, 50.0)
    assert stamped and arrived == pytest.approx(50.0 - 0.02, abs=1e-9)


def test_the_wall_clocks_own_value_does_not_matter_only_the_age():
    """The same packet read before and after a 28 s step of the wall clock arrives at the same monotonic time."""
    before = arrival(1000.0 - 0.02, 1000.0, 50.0)
    after = arrival(1028.0 - 0.02, 1028.0, 50.0)
    assert before[1] and after[1] and before[0] == pytest.approx(after[0], abs=1e-9)


def test_a_stamp_far_from_the_read_or_none_counts_the_read():
    assert arrival(None, 1000.0, 50.0) == (50.0, False)
    assert arrival(1000.0 - 6.0, 1000.0, 50.0) == (50.0, False)  # a sender's departure time, another clock
    assert arrival(1000.0 + 1.0, 1000.0, 50.0) == (50.0, False)  # from the future
