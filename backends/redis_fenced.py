"""redis-py's Lock plus a fencing token from INCR, checked by PostgreSQL in the write transaction."""

from __future__ import annotations

from backends.redis_lock import RedisLock


class RedisFencedLock(RedisLock):
    """Kleppmann's fix applied to Redis: the storage refuses a write with an older token."""

    name = "redis_fenced"
    summary = "redis-py Lock + INCR fencing token, checked by PostgreSQL inside the write"
    capabilities = frozenset({"lease_expiry", "fencing", "exclusion"})

    def _try_acquire(self) -> int | None:
        if not self.lock.acquire():
            return None
        # A counter beside the lock: every grant gets a higher number (while Redis keeps its data).
        return int(self.client.incr(f"locklab:{self.key}:fence"))
