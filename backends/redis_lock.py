"""redis-py's own Lock (SET NX PX with a random token, Lua compare-and-delete), with no fencing."""

from __future__ import annotations

from backends._lease import LeaseBackend
from backends.base import BareCall
from lab.declarations.capabilities import Capability
from lab.servers.clients import redis_client


class RedisLock(LeaseBackend):
    """What most applications do: a Redis lock with a timeout, not extended, not fenced."""

    name = "redis"
    summary = "redis-py Lock (SET NX PX, random token, Lua release) with a TTL; no fencing"
    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.EXCLUSION, Capability.REPLICA_ACK})
    services = ("postgres", "redis")
    renews = False  # redis-py does not extend a lock by itself; most callers never do

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        url = ctx.lock_services.redis_url
        # Socket timeouts of one TTL: a cut connection fails the call instead of hanging the run.
        self.client = redis_client(url, socket_timeout=self.ttl, socket_connect_timeout=self.ttl)
        # thread_local=False: the token must be visible to the keep-alive and release threads.
        self.lock = self.client.lock(f"locklab:{key}", timeout=self.ttl, blocking=False, thread_local=False)

    def _try_acquire(self) -> int | None:
        return 0 if self.lock.acquire() and self._replicated() else None

    def _replicated(self) -> bool:
        """With option wait_replicas=N: WAIT until N replicas have the grant, for a quarter of the TTL; if
        fewer do, give the grant back and refuse it. WAIT narrows Redis' failover window; it does not make
        replication synchronous (a replica that acknowledged can still lose the key at failover)."""
        wanted = int(self.ctx.options.get("wait_replicas", 0))
        if not wanted:
            return True
        timeout_ms = max(1, int(self.ttl * 250))
        acked = self.client.wait(wanted, timeout_ms)
        if acked >= wanted:
            return True
        self.grant_note = f"WAIT {wanted} {timeout_ms}: {acked} replica(s) acknowledged the grant; given back"
        self.lock.release()
        return False

    def _renew(self) -> bool:
        return bool(self.lock.reacquire())  # raises LockNotOwnedError once the key is someone else's

    def _owned(self) -> bool:
        return self.lock.owned()

    def _release(self) -> bool:
        self.lock.release()  # raises LockNotOwnedError (or LockError) when it is not ours any more
        return True

    def bare_call(self, key: str) -> BareCall | None:
        """redis-py's Lock on a client of its own: acquire() and release(), nothing else."""
        client = self._bare_client()
        lock = client.lock(f"locklab:{key}", timeout=self.ttl, blocking=False, thread_local=False)
        return BareCall("redis-py Lock.acquire(); Lock.release()", lock.acquire, lock.release, client.close)

    def _bare_client(self):
        return redis_client(self.ctx.lock_services.redis_url, socket_timeout=self.ttl,
                            socket_connect_timeout=self.ttl)

    def close(self) -> None:
        super().close()
        self.client.close()
