"""What a service's floor probe is: the cheapest calls a client makes to the service, timed one by one.

The latency scenario divides a lock's acquire + release by its service's floor, sampled beside each pair so both
meet the same machine. A probe opens its clients once (on the kind of connection the service's locks use), names
each call it times, and `main` is the one a lock's ratio is taken to.
"""

from __future__ import annotations

import time
from typing import Callable, ClassVar

from lab.servers.services import Services


class FloorProbe:
    """The floor calls of one lock service on connections opened once; sample() times each, close() ends them."""

    service: ClassVar[str]  # the lock service this probe measures
    main: ClassVar[str]  # the call a lock's ratio is taken to

    def __init__(self, services: Services, key: str, commit_table: str):
        """key: a name of the trial's own (its rows and keys); commit_table: the lab's table a SQL probe commits to."""
        self.calls: dict[str, Callable[[], object]] = {}
        self._closers: list[Callable[[], object]] = []
        try:
            self.open(services, key, commit_table)
        except BaseException:
            self.close()
            raise

    def open(self, services: Services, key: str, commit_table: str) -> None:
        """Connect, and fill self.calls (main among them) and self._closers."""
        raise NotImplementedError

    def sample(self) -> dict[str, float]:
        """Each call once, timed in seconds."""
        return {name: timed(call) for name, call in self.calls.items()}

    def close(self) -> None:
        for close in self._closers:
            try:
                close()
            except Exception:  # a client already gone: nothing left to end
                pass


def timed(call: Callable[[], object]) -> float:
    """Seconds one call took, on the monotonic performance counter."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start
