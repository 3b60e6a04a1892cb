"""Round trips counted per acquire and release: an acquire refused although uncontended is counted apart and tried
again, never counted as a pair's requests; a lock that keeps refusing is an error (planted calls, no server)."""

import pytest

from lab.report.latency import _round_trips
from scenarios.latency import COUNTED, _count_pairs, refusal_backoff


class Proxy:
    """What _count_pairs reads of a counting proxy: the requests it relayed so far."""

    def __init__(self):
        self.requests = 0


def planted(proxy, refusals):
    """An acquire that sends 2 requests and is refused on the calls numbered in `refusals`; a release that sends 1."""
    calls = [0]

    def acquire():
        calls[0] += 1
        proxy.requests += 2
        return calls[0] not in refusals

    def release():
        proxy.requests += 1

    return acquire, release


def test_a_refused_acquire_is_counted_apart_and_its_requests_are_no_pairs():
    proxy = Proxy()
    out = _count_pairs([proxy], None, *planted(proxy, refusals={1, 4}), backoff=lambda n: 0.0)  # warm-up's, a pair's
    assert out["refused"] == 2 and out["pairs"] == COUNTED
    assert (out["acquire"], out["release"], out["acquire_max"]) == (2, 1, 2)  # a refusal's 2 requests not added in
    assert "2 uncontended acquires refused, not counted" in _round_trips(out)


def test_a_lock_that_keeps_refusing_is_an_error_not_a_count():
    proxy = Proxy()
    with pytest.raises(RuntimeError, match="refused"):
        _count_pairs([proxy], None, *planted(proxy, refusals=set(range(1, 100))), backoff=lambda n: 0.0)


def test_a_run_without_refusals_reads_as_before():
    proxy = Proxy()
    out = _count_pairs([proxy], None, *planted(proxy, refusals=set()))
    assert out["refused"] == 0 and _round_trips(out) == "2 + 1"


def test_the_retries_outwait_a_left_behind_key():
    """COUNTED refusals wait longer in all than the TTL latency's locks get, doubling from 0.05 s."""
    from backends._lease import DEFAULT_TTL_S

    waits = [refusal_backoff(n) for n in range(1, COUNTED + 1)]
    assert waits[0] == 0.05 and waits == sorted(waits) and max(waits) <= 1.0
    assert sum(waits) > DEFAULT_TTL_S
