"""python-redis-lock (module redis_lock), as its README shows it: Lock(conn, name, expire=..., auto_renewal=...).

It takes any redis-py client: behind Sentinel (a redis+sentinel:// address) it is handed redis-py's
Sentinel(...).master_for client, the library's only way there.
"""

from __future__ import annotations

import redis_lock

from backends.adapters._redis_lease import UnfencedRedisLease
from backends.base import BareCall
from lab.servers.clients import redis_client


class PythonRedisLock(UnfencedRedisLease):
    """python-redis-lock with an expiry and no renewal; the library's own acquire, locked and release."""

    name = "python_redis_lock"
    summary = "python-redis-lock Lock(expire=TTL), no auto_renewal; no fencing"
    library = "python-redis-lock"
    renews = False  # the library's auto_renewal thread does it, when asked (see the subclass)
    auto_renewal = False

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        url = ctx.lock_services.redis_url
        self.client = redis_client(url, socket_timeout=self.ttl, socket_connect_timeout=self.ttl)
        self.lock = redis_lock.Lock(self.client, f"locklab:{key}", expire=max(1, int(round(self.ttl))),
                                    auto_renewal=self.auto_renewal)

    def _try_acquire(self) -> int | None:
        return 0 if self.lock.acquire(blocking=False) else None

    def _renew(self) -> bool:
        return False

    def _owned(self) -> bool:
        return self.lock.get_owner_id() == self.lock.id

    def _release(self) -> bool:
        self.lock.release()  # raises redis_lock.NotAcquired when it is not ours any more
        return True

    def bare_call(self, key: str) -> BareCall | None:
        """The library's Lock on a client of its own: acquire(blocking=False) and release()."""
        client = redis_client(self.ctx.lock_services.redis(), socket_timeout=self.ttl,
                              socket_connect_timeout=self.ttl)
        lock = redis_lock.Lock(client, f"locklab:{key}", expire=self.lock._expire, auto_renewal=self.auto_renewal)
        return BareCall(f"python-redis-lock Lock(auto_renewal={self.auto_renewal}).acquire(blocking=False); release()",
                        lambda: lock.acquire(blocking=False), lock.release, client.close)

    def close(self) -> None:
        super().close()
        if self.auto_renewal and self.lock._lock_renewal_thread is not None:
            self.lock._stop_lock_renewer()  # the library's own stop, so no renewal thread outlives the run
        self.client.close()


class PythonRedisLockRenewed(PythonRedisLock):
    """The same with auto_renewal=True: the library renews from its own thread every expire * 2/3."""

    name = "python_redis_lock_renew"
    summary = "python-redis-lock Lock(expire=TTL, auto_renewal=True); no fencing"
    auto_renewal = True
