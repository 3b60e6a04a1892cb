"""OpenStack tooz's Redis lock, as tooz documents it: a coordinator with its heartbeat, get_lock, acquire.

tooz renews held locks from its heartbeat; when a lock is no longer owned it logs a warning
and tells the caller nothing. The lab reads ownership from the library's redis lock and
changes nothing in how tooz locks.
"""

from __future__ import annotations

from urllib.parse import urlparse

from backends.adapters._tooz import ToozLease


class ToozRedisLock(ToozLease):
    name = "tooz_redis"
    summary = "OpenStack tooz Redis lock (coordinator heartbeat renews it); no fencing"
    services = ("postgres", "redis")

    def _coordinator_url(self) -> str:
        parsed = urlparse(self.ctx.lock_services.redis_url)
        ttl = max(1, int(round(self.ttl)))
        # netloc, not host:port: a password in the URL must reach tooz too.
        return f"redis://{parsed.netloc}?lock_timeout={ttl}&timeout={ttl}"

    def _owned(self) -> bool:
        return self.lock._lock.owned()  # the redis-py lock tooz holds: read, never changed
