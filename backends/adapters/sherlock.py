"""sherlock's Redis and etcd locks, as its README shows them: Lock(name, client=..., expire=...), acquire, renew, release.

sherlock has no renewal of its own: its documentation has the caller call renew(), which
returns False once the lock is no longer ours. The lab's keep-alive thread is that caller.
Its Redis lock takes any redis-py client: behind Sentinel it is handed redis-py's master_for client.
Its etcd lock speaks etcd's v2 API only, which etcd 3.5 serves with --enable-v2 (the lab's
embedded etcd has it on) and etcd 3.6 no longer serves at all.
"""

from __future__ import annotations

from urllib.parse import urlparse

import sherlock

from backends._lease import LeaseBackend
from backends.base import BareCall
from lab.declarations.capabilities import Capability
from lab.servers.clients import redis_client


class _SherlockLease(LeaseBackend):
    """acquire(blocking=False), renew() from the keep-alive, release(); ownership read, never written."""

    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.EXCLUSION})
    library = "sherlock"
    lock: sherlock.lock.BaseLock

    def _try_acquire(self) -> int | None:
        return 0 if self.lock.acquire(blocking=False) else None

    def _renew(self) -> bool:
        return bool(self.lock.renew())

    def _release(self) -> bool:
        self.lock.release()  # raises sherlock.LockException when the lock is not ours any more
        return True

    def _bare(self, lock: sherlock.lock.BaseLock, close) -> BareCall:
        """The bare call on a sherlock lock made with a client of its own: acquire(blocking=False), release()."""

        def closing() -> None:
            lock._owner = None  # as in close(): no release from __del__ after its client is gone
            close()

        return BareCall(f"sherlock {type(lock).__name__}.acquire(blocking=False); release()",
                        lambda: lock.acquire(blocking=False), lock.release, closing)

    def abandon(self) -> None:
        # A killed process runs no finalizer, but sherlock's __del__ releases: forget the owner
        # token, so that __del__ finds nothing of ours to release and the lease runs out on the server.
        self.lock._owner = None
        super().abandon()

    def close(self) -> None:
        # Whatever release() did is recorded by now; a lock object that outlives this backend must not
        # try again from __del__ (which swallows only LockException, so a cut connection's error would
        # print a traceback at some later garbage collection).
        super().close()
        self.lock._owner = None


class SherlockRedisLock(_SherlockLease):
    name = "sherlock_redis"
    summary = "sherlock RedisLock(expire=TTL), renew() every TTL/3; no fencing"
    services = ("postgres", "redis")

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        url = ctx.lock_services.redis_url
        self.client = redis_client(url, socket_timeout=self.ttl, socket_connect_timeout=self.ttl)
        self.lock = sherlock.RedisLock(f"locklab:{key}", client=self.client,
                                       expire=max(1, int(round(self.ttl))), timeout=0)

    def _owned(self) -> bool:
        owner = self.lock._owner
        return owner is not None and self.client.get(self.lock._key_name) == owner.encode()

    def bare_call(self, key: str) -> BareCall | None:
        """sherlock's RedisLock on a client of its own."""
        client = redis_client(self.ctx.lock_services.redis(), socket_timeout=self.ttl,
                              socket_connect_timeout=self.ttl)
        return self._bare(sherlock.RedisLock(f"locklab:{key}", client=client, expire=self.lock.expire, timeout=0),
                          client.close)

    def close(self) -> None:
        super().close()
        self.client.close()


class SherlockEtcdLock(_SherlockLease):
    name = "sherlock_etcd"
    summary = "sherlock EtcdLock (etcd v2 API, key TTL), renew() every TTL/3; no fencing"
    packages = ("python-etcd",)
    services = ("postgres", "etcd")

    @classmethod
    def cannot_run(cls, services) -> str | None:
        import etcd

        host, _, port = services.etcd_endpoint.rpartition(":")
        try:
            etcd.Client(host=host, port=int(port), read_timeout=5).read("/")
        except etcd.EtcdException as exc:
            return f"etcd at {services.etcd_endpoint} does not serve the v2 API sherlock needs ({exc})"
        return None

    def __init__(self, ctx, key):
        import etcd  # python-etcd, the v2 client sherlock's etcd lock is written for

        super().__init__(ctx, key)
        endpoint = urlparse("//" + ctx.lock_services.etcd_endpoint)
        self.client = etcd.Client(host=endpoint.hostname, port=endpoint.port or 2379, read_timeout=self.ttl)
        self.lock = sherlock.EtcdLock(f"locklab-{key}", client=self.client,
                                      expire=max(1, int(round(self.ttl))), timeout=0)

    def _owned(self) -> bool:
        import etcd

        owner = self.lock._owner
        try:
            return owner is not None and self.client.get(self.lock._key_name).value == owner
        except etcd.EtcdKeyNotFound:
            return False

    def bare_call(self, key: str) -> BareCall | None:
        """sherlock's EtcdLock on a python-etcd client of its own."""
        import etcd

        client = etcd.Client(host=self.client.host, port=self.client.port, read_timeout=self.ttl)
        return self._bare(sherlock.EtcdLock(f"locklab-{key}", client=client, expire=self.lock.expire, timeout=0),
                          client.http.clear)

    def close(self) -> None:
        super().close()
        self.client.http.clear()  # urllib3's pool: close its sockets now
