"""Holder processes started ahead of need, so a trial's holder has done its imports before the trial begins.

A holder is a fresh Python process (lab/harness/holder.py) whose imports (SQLAlchemy, the lab's modules)
take about half a second of CPU before it can acquire. On this 2-core machine, in a scenario of many short
trials that wait on timers, that start-up set the wall time rather than any timer: pause ran 2.6x its bound,
restart (one trial at a time) 1.8x. A spare is started while earlier trials wait, does its imports, and
blocks reading its spec; the next trial's holder is that process. A run opens the pool and closes it
(lab/runner/run.py); with no pool open every holder starts for its trial, as before.

Only a holder in the lab's own environment and network can be a spare: one that runs in a network
namespace or under a fake clock is started for its trial. Spares die with the lab, as every child does, and
exit on their own when their stdin closes.
"""

from __future__ import annotations

import subprocess
import threading
from typing import Callable

from lab.servers.processes import kill_and_close

MOST = 8  # spares kept at most: enough for a wave's starts to find one, each about 40 MB

_lock = threading.Lock()
_pool: SparePool | None = None


class SparePool:
    """Started holder processes waiting for a spec; take() hands one out and starts its replacement."""

    def __init__(self, start: Callable[[], subprocess.Popen], most: int = MOST):
        self._start, self._most = start, most
        self._spares: list[subprocess.Popen] = []
        self._lock = threading.Lock()
        self.taken = self.started_cold = 0  # for the tests and the curious: how often a spare was ready

    def take(self) -> subprocess.Popen:
        """A waiting holder process; when none was left, one started now, and the pool grows by one, so that
        trials starting together find spares next time."""
        with self._lock:
            ready = None
            while self._spares and ready is None:
                candidate = self._spares.pop(0)
                ready = candidate if candidate.poll() is None else None
            wanted = 1 if ready is not None else 2
            wanted = max(0, min(wanted, self._most - len(self._spares)))
        if ready is None:
            self.started_cold += 1
            ready = self._start()
        else:
            self.taken += 1
        fresh = [self._start() for _ in range(wanted)]
        with self._lock:
            self._spares.extend(fresh)
        return ready

    def close(self) -> None:
        """Kill every waiting spare and reap it."""
        with self._lock:
            spares, self._spares = self._spares, []
        for proc in spares:
            kill_and_close(proc)


def open_pool(start: Callable[[], subprocess.Popen]) -> None:
    """Let holders started from now on come from spares (a run's start)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = SparePool(start)


def close_pool() -> None:
    """No more spares: the waiting ones are killed (a run's end, whatever ended it)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.close()


def take() -> subprocess.Popen | None:
    """A spare holder process when a pool is open, else None (the caller starts one)."""
    with _lock:
        pool = _pool
    return None if pool is None else pool.take()
