"""redis-py's Lock whose grant and fencing token come from one Lua script, checked by PostgreSQL in the write."""

from __future__ import annotations

import uuid

from backends.base import BareCall
from backends.redis_lock import RedisLock
from lab.declarations.capabilities import Capability

# Grant and token in one step: SET NX PX, and only when that set the key, INCR the counter.
# Two round trips (lock.acquire(), then INCR) let a holder paused between them past the TTL
# draw a token higher than the next holder's: its stale write passes the fence, the rightful
# one is refused. Inside one script nothing can run in between.
GRANT_AND_TOKEN = """
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('incr', KEYS[2])
end
return false
"""


class RedisFencedLock(RedisLock):
    """Kleppmann's fix applied to Redis: the storage refuses a write with an older token."""

    name = "redis_fenced"
    summary = "redis-py Lock, grant + INCR fencing token in one Lua script, checked by PostgreSQL inside the write"
    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.FENCING, Capability.EXCLUSION, Capability.REPLICA_ACK})

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self.fence_key = f"locklab:{key}:fence"
        self._grant = self.client.register_script(GRANT_AND_TOKEN)

    def _try_acquire(self) -> int | None:
        token = uuid.uuid1().hex.encode()  # the same kind of token redis-py's Lock.acquire makes
        ttl_ms = int(self.lock.timeout * 1000)
        fence = self._grant(keys=[self.lock.name, self.fence_key], args=[token, ttl_ms])
        if fence is None:
            return None
        # Hand the token to redis-py's Lock: its reacquire, owned and release work on it unchanged.
        self.lock.local.token = token
        if not self._replicated():
            return None
        # Every grant gets a higher number (while Redis keeps its data).
        return int(fence)

    def bare_call(self, key: str) -> BareCall | None:
        """The same script through redis-py's Script, then redis-py's Lock.release() with that token."""
        client = self._bare_client()
        grant = client.register_script(GRANT_AND_TOKEN)
        lock = client.lock(f"locklab:{key}", timeout=self.ttl, thread_local=False)
        ttl_ms, keys = int(self.ttl * 1000), [lock.name, f"locklab:{key}:fence"]

        def acquire():
            lock.local.token = uuid.uuid1().hex.encode()
            return grant(keys=keys, args=[lock.local.token, ttl_ms])

        return BareCall("redis-py Script(SET NX PX + INCR); Lock.release()", acquire, lock.release, client.close)
