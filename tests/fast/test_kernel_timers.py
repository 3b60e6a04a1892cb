"""The timer wheel's lateness follows kernel/time/timer.c's level table, and its worst case bounds every HZ."""

from hypothesis import given
from hypothesis import strategies as st

from lab.checkers.keepalive import ends_as_estimated
from lab.servers.kernel_timers import WORST_FRACTION, granularity_s, keepalive_lateness_s


def test_granularities_are_the_kernels_table_at_hz_250_and_1000():
    assert granularity_s(7200, 250) == 32768 / 250  # level 5: ~17 min to ~2 h, 131 s buckets
    assert granularity_s(75, 250) == 512 / 250  # level 3: ~16 s to ~2 min
    assert granularity_s(7200, 1000) == 262144 / 1000  # level 6 at HZ=1000
    assert granularity_s(0.2, 250) == 1 / 250  # level 0: one jiffy
    assert round(keepalive_lateness_s(7200, 75, 9, 250), 3) == 149.504


@given(st.floats(min_value=0.5, max_value=86400), st.sampled_from([100, 250, 300, 1000]))
def test_no_hz_is_later_than_the_worst_fraction(delay, hz):
    assert granularity_s(delay, hz) <= max(delay * WORST_FRACTION, 8 / hz)


def test_an_early_end_never_agrees():
    assert not ends_as_estimated(6.5, 8, 1, 0.35)
    assert ends_as_estimated(8.3, 8, 1, 0.35) and not ends_as_estimated(9.4, 8, 1, 0.35)
