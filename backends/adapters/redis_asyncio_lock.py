"""redis-py's asyncio lock, as its documentation shows it: redis.asyncio.lock.Lock(redis, name, timeout=TTL).

What the library promises: a key set with SET NX PX and a random token, released and extended by Lua
scripts that check the token, so a release or extend() / reacquire() of a lock that is no longer ours
raises LockNotOwnedError. It renews nothing by itself: its documentation leaves extend() or
reacquire() to the caller, so the lab's keep-alive thread calls reacquire() every TTL/3, as it calls
sherlock's renew(). No fencing token: a holder paused past its TTL writes on regardless.

Behind Sentinel (a redis+sentinel:// address) the client is the library's own asyncio Sentinel's
master_for (lab/servers/clients.py: redis_asyncio_client).

The lock is a coroutine API: each instance runs its own event loop on a thread of its own (as the
lab's asyncpg driver does), and every call into the library is made on that loop's thread. That matters:
with its default thread_local=True the token lives in a threading.local, and reacquire(), extend() and
release() read it synchronously before returning their awaitable, so a caller that creates the
coroutine on another thread (a renewal thread handing it to the loop) gets AttributeError, not a
renewal: the lab's first quick run lost every lease that way (its told table showed the
AttributeError from renew()), and the adapter now makes each call inside a coroutine on the loop.
What the lab found (quick run of every scenario): held through a kill, an overlap, a paused Redis and
a restart with appendfsync always; the stale write accepted with the holder paused past the TTL, its
connection cut, Redis restarted without AOF, a failover (caught up or behind) and a kill-point search.
Its holder hears LockNotOwnedError from reacquire() about when the contender is granted (before the
stale write, which goes ahead), nothing at all on a failover, and release() claims success 2 of 5 times.
"""

from __future__ import annotations

import redis.asyncio.lock

from backends.adapters._redis_lease import UnfencedRedisLease
from backends.base import BareCall
from lab.servers.clients import redis_asyncio_client
from lab.servers.postgres.drivers import _Loop


async def _on_loop(call):
    """Call the library on its loop's thread, not only await there: reacquire(), extend() and release()
    read the token from a threading.local (thread_local=True, the default) before they return their
    awaitable, so called from the keep-alive thread they raise AttributeError: no attribute 'token'."""
    return await call()


class RedisAsyncioLock(UnfencedRedisLease):
    """redis.asyncio Lock(timeout=TTL): acquire(blocking=False), reacquire() from the keep-alive, owned(), release()."""

    name = "redis_asyncio"
    summary = "redis-py redis.asyncio.lock.Lock(timeout=TTL), reacquire() every TTL/3; no fencing"
    library = "redis"

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self.loop = _Loop()
        self.client, self.lock = self._make(key)

    def _make(self, key: str):
        client = redis_asyncio_client(self.ctx.lock_services.redis(), socket_timeout=self.ttl,
                                      socket_connect_timeout=self.ttl)
        return client, redis.asyncio.lock.Lock(client, f"locklab:{key}", timeout=self.ttl)

    def _run(self, call):
        return self.loop.run(_on_loop(call), timeout=max(5.0, 3 * self.ttl))

    def _try_acquire(self) -> int | None:
        return 0 if self._run(lambda: self.lock.acquire(blocking=False)) else None

    def _renew(self) -> bool:
        return bool(self._run(self.lock.reacquire))  # raises LockNotOwnedError once the key is not ours

    def _owned(self) -> bool:
        return bool(self._run(self.lock.owned))

    def _release(self) -> bool:
        self._run(self.lock.release)  # raises LockNotOwnedError (or LockError) when it is not ours any more
        return True

    def bare_call(self, key: str) -> BareCall | None:
        """The library's asyncio Lock on a client and an event loop of its own."""
        loop = _Loop()
        client = redis_asyncio_client(self.ctx.lock_services.redis(), socket_timeout=self.ttl,
                                      socket_connect_timeout=self.ttl)
        lock = redis.asyncio.lock.Lock(client, f"locklab:{key}", timeout=self.ttl)

        def close() -> None:
            try:
                loop.run(client.aclose(), timeout=5)
            finally:
                loop.close()

        return BareCall("redis.asyncio Lock(timeout=TTL).acquire(blocking=False); release(), each awaited on its loop",
                        lambda: loop.run(_on_loop(lambda: lock.acquire(blocking=False))),
                        lambda: loop.run(_on_loop(lock.release)), close)

    def close(self) -> None:
        super().close()
        if self.loop is None:
            return
        try:
            self._run(self.client.aclose)
        except Exception:
            pass  # a cut or killed server: the sockets go with the loop
        finally:
            self.loop.close()
            self.loop = None
