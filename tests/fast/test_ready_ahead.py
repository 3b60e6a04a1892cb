"""Servers started ahead of the trials that take them: how many, in what order, and none left at the end."""

import threading

import pytest

from lab.servers.ready_ahead import ReadyAhead


class Starts:
    """Numbered things 'started' and 'stopped', with a record of both (the scheduling, not a server)."""

    def __init__(self, fail_at: int | None = None):
        self.started, self.stopped, self.fail_at = [], [], fail_at
        self.lock = threading.Lock()

    def start(self) -> int:
        with self.lock:
            n = len(self.started)
            self.started.append(n)
        if n == self.fail_at:
            raise RuntimeError(f"start {n} failed")
        return n

    def stop(self, n: int) -> None:
        self.stopped.append(n)


def test_takes_get_fresh_servers_in_order_and_never_more_than_planned():
    starts = Starts()
    ahead = ReadyAhead(starts.start, starts.stop, count=3, ahead=1)
    assert [ahead.take() for _ in range(3)] == [0, 1, 2]
    ahead.close()
    assert starts.started == [0, 1, 2] and starts.stopped == []  # each taken once; the trials stop their own


def test_close_stops_the_ones_started_ahead_and_never_taken():
    starts = Starts()
    ahead = ReadyAhead(starts.start, starts.stop, count=5, ahead=2)
    assert ahead.take() == 0
    ahead.close()
    assert sorted(starts.stopped) == sorted(set(starts.started) - {0}) and starts.stopped  # 1 and 2 were ahead
    with pytest.raises(RuntimeError, match="after close"):
        ahead.take()


def test_more_takes_than_planned_start_one_each_at_once():
    starts = Starts()
    ahead = ReadyAhead(starts.start, starts.stop, count=1, ahead=1)
    assert ahead.take() == 0 and ahead.take() == 1  # a trial nobody planned for still gets its server
    ahead.close()
    assert starts.stopped == []


def test_a_start_that_failed_ahead_fails_the_trial_that_takes_it():
    starts = Starts(fail_at=0)
    ahead = ReadyAhead(starts.start, starts.stop, count=2, ahead=1)
    with pytest.raises(RuntimeError, match="start 0 failed"):
        ahead.take()
    assert ahead.take() == 1
    ahead.close()
    assert starts.stopped == []
