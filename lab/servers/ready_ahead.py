"""Servers started ahead of the trials that will take them, so a trial's start-up overlaps other trials' waits.

Why: a scenario whose every trial starts a cluster of its own (etcd_partition's three members, 1.8-4 s) spent
that time inside each trial, where nothing else of the scenario could use it. Started one ahead on a thread of
its own, the next trial's cluster comes up while the running trials sit out their TTLs, and a trial takes one
already up. Each server is still fresh and used by one trial only: nothing carries over between trials. At most
`count` are ever started (the scenario's trials), and close() stops whichever were not taken.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class ReadyAhead(Generic[T]):
    """Keeps `ahead` servers starting or started, for `count` takes in all; take() hands out the oldest."""

    def __init__(self, start: Callable[[], T], stop: Callable[[T], None], count: int, ahead: int = 1):
        self._start, self._stop, self._ahead = start, stop, max(1, ahead)
        self._left = count  # how many more may be started, ahead or on take()
        self._queue: deque[Future[T]] = deque()
        self._lock = threading.Lock()
        self._closed = False
        self._pool = ThreadPoolExecutor(self._ahead, thread_name_prefix="ready-ahead")
        with self._lock:
            self._fill()

    def _fill(self) -> None:
        """Start more until `ahead` are on the way (under the lock)."""
        while not self._closed and self._left > 0 and len(self._queue) < self._ahead:
            self._left -= 1
            self._queue.append(self._pool.submit(self._start))

    def take(self) -> T:
        """A started server, the trial's to stop: one started ahead (waiting for it if still starting), else one
        started now. A start that failed ahead raises here, as it would have in the trial."""
        with self._lock:
            if self._closed:
                raise RuntimeError("no server is handed out after close()")
            future = self._queue.popleft() if self._queue else None
            if future is None:
                self._left = max(0, self._left - 1)
            self._fill()
        return future.result() if future is not None else self._start()

    def close(self) -> None:
        """Stop every server started ahead and never taken; wait for any still starting, then stop it too."""
        with self._lock:
            self._closed = True
            left = list(self._queue)
            self._queue.clear()
        for future in left:
            if future.cancel():
                continue
            try:
                server = future.result()
            except Exception:  # its start failed: nothing to stop (its own cleanup ran)
                continue
            self._stop(server)
        self._pool.shutdown(wait=True)
