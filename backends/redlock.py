"""The Redlock algorithm over three independent Redis masters, from pottery; no fencing."""

from __future__ import annotations

from pottery import Redlock

from backends._lease import LeaseBackend
from backends.base import BareCall
from lab.declarations.capabilities import Capability
from lab.servers.clients import redis_client


class RedlockLock(LeaseBackend):
    """A lock held by a majority of masters for auto_release_time; not extended (pottery allows 3)."""

    name = "redlock"
    summary = "Redlock over 3 Redis masters (pottery), auto-release after the TTL; no fencing"
    packages = ("pottery",)
    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.EXCLUSION})
    services = ("postgres", "redlock")
    renews = False

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        urls = ctx.lock_services.redlock_urls
        self.clients = [redis_client(u, socket_timeout=self.ttl, socket_connect_timeout=self.ttl) for u in urls]
        self.lock = Redlock(key=f"locklab:{key}", masters=set(self.clients), auto_release_time=self.ttl)

    def _try_acquire(self) -> int | None:
        return 0 if self.lock.acquire(blocking=False) else None

    def _renew(self) -> bool:
        return False

    def _owned(self) -> bool:
        return self.lock.locked() > 0

    def _release(self) -> bool:
        self.lock.release()  # raises ReleaseUnlockedLock when it is not ours any more
        return True

    def bare_call(self, key: str) -> BareCall | None:
        """pottery's Redlock over clients of its own: acquire(blocking=False) and release()."""
        clients = [redis_client(u, socket_timeout=self.ttl, socket_connect_timeout=self.ttl)
                   for u in self.ctx.lock_services.redlock()]
        lock = Redlock(key=f"locklab:{key}", masters=set(clients), auto_release_time=self.ttl)
        return BareCall("pottery Redlock.acquire(blocking=False); Redlock.release()",
                        lambda: lock.acquire(blocking=False), lock.release, lambda: [c.close() for c in clients])

    def close(self) -> None:
        super().close()
        for client in self.clients:
            client.close()
