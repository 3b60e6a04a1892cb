"""What every tooz adapter shares: a coordinator with its heartbeat started, get_lock, acquire, release.

tooz renews held locks from that heartbeat, so the lab's keep-alive stays off. Each driver's
module gives only its coordinator URL and how to read, never change, who owns the lock.
"""

from __future__ import annotations

import secrets
from abc import abstractmethod

from tooz import coordination

from backends._lease import LeaseBackend
from backends.base import BareCall
from lab.declarations.capabilities import Capability


class ToozLease(LeaseBackend):
    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.EXCLUSION})
    library = "tooz"
    renews = False  # tooz's own heartbeat renews held locks

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self.coordinator = coordination.get_coordinator(self._coordinator_url(), secrets.token_hex(8).encode())
        self.coordinator.start(start_heart=True)
        self.lock = self.coordinator.get_lock(f"locklab:{key}".encode())

    @abstractmethod
    def _coordinator_url(self) -> str:
        """The tooz URL of this driver's server, with the lock's TTL in it."""

    def _try_acquire(self) -> int | None:
        return 0 if self.lock.acquire(blocking=False) else None

    def _renew(self) -> bool:
        return False

    def _release(self) -> bool:
        return bool(self.lock.release())

    def bare_call(self, key: str) -> BareCall | None:
        """tooz's own lock, from a coordinator of its own started with its heartbeat, as tooz documents it."""
        coordinator = coordination.get_coordinator(self._coordinator_url(), secrets.token_hex(8).encode())
        coordinator.start(start_heart=True)
        lock = coordinator.get_lock(f"locklab:{key}".encode())
        return BareCall("tooz get_lock().acquire(blocking=False); release()", lambda: lock.acquire(blocking=False),
                        lock.release, coordinator.stop)

    def abandon(self) -> None:
        # A killed process releases nothing: forget the held lock before stopping the coordinator,
        # whose stop() would otherwise release it on our behalf.
        self.coordinator._acquired_locks.clear()
        super().abandon()

    def close(self) -> None:
        super().close()
        if self.coordinator.is_started:  # close() may follow abandon(); tooz refuses a second stop
            self.coordinator.stop()
