"""OpenStack tooz's Redis lock, as tooz documents it: a coordinator with its heartbeat, get_lock, acquire.

tooz renews held locks from its heartbeat; when a lock is no longer owned it logs a warning
and tells the caller nothing. The lab reads ownership from the library's redis lock and
changes nothing in how tooz locks.
"""

from __future__ import annotations

import secrets
from urllib.parse import urlparse

from tooz import coordination

from backends._lease import LeaseBackend


class ToozRedisLock(LeaseBackend):
    name = "tooz_redis"
    summary = "OpenStack tooz Redis lock (coordinator heartbeat renews it); no fencing"
    capabilities = frozenset({"lease_expiry", "exclusion"})
    services = ("postgres", "redis")
    renews = False  # tooz's own heartbeat renews held locks

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        parsed = urlparse(ctx.options.get("lock_redis_url") or ctx.services.redis_url)
        ttl = max(1, int(round(self.ttl)))
        url = f"redis://{parsed.hostname}:{parsed.port}?lock_timeout={ttl}&timeout={ttl}"
        self.coordinator = coordination.get_coordinator(url, secrets.token_hex(8).encode())
        self.coordinator.start(start_heart=True)
        self.lock = self.coordinator.get_lock(f"locklab:{key}".encode())

    def _try_acquire(self) -> int | None:
        return 0 if self.lock.acquire(blocking=False) else None

    def _renew(self) -> bool:
        return False

    def _owned(self) -> bool:
        return self.lock._lock.owned()  # the redis-py lock tooz holds: read, never changed

    def _release(self) -> bool:
        return bool(self.lock.release())

    def abandon(self) -> None:
        # A killed process releases nothing: forget the held lock before stopping the coordinator,
        # whose stop() would otherwise release it on our behalf.
        self.coordinator._acquired_locks.clear()
        super().abandon()

    def close(self) -> None:
        super().close()
        if self.coordinator.is_started:  # close() may follow abandon(); tooz refuses a second stop
            self.coordinator.stop()
