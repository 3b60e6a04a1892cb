"""celery-once's Redis backend, as QueueOnce uses it: raise_or_lock(key, timeout) when a task is queued,
clear_lock(key) when it returns.

What the library promises (celery-once 3.0, celery_once/backends/redis.py): a key set with redis-py's
Lock (SET NX PX, a random token), whose Lock object is dropped at once, so nothing keeps the token;
AlreadyQueued when the key exists; and clear_lock() is a plain DEL of the key, whoever set it. No
renewal (a task that outlives `default_timeout` loses its lock silently), no fencing. The lab calls
raise_or_lock with the TTL and clear_lock at release, as QueueOnce does around a task.

held() compares the key's value with the token it held right after the grant (read once then, since
the library keeps none); release() asks the same before clearing, so the adapter's release never lies,
but clear_lock itself deletes whatever lock is there: another run's, after a lapse.

celery-once caches one Redis client per process (a module global built from the first settings it
sees); the lab's process holds locks at two addresses at once (a contender direct, a routed holder
through a cut's proxy), so each instance gets a client of its own, built from its URL as the library
builds its own (parse_url), with the socket timeouts the other adapters have (the TTL). That parse_url
keeps a URL's password and drops its user name: against a Redis that needs an ACL user (tests/system's
Redis 7) the library cannot log in, and every cell says *does not run* with Redis' answer.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import redis
from celery_once import AlreadyQueued
from celery_once.backends import Redis as OnceRedis
from celery_once.backends.redis import parse_url

from backends.adapters._redis_lease import UnfencedRedisLease
from backends.base import BareCall, describe_error
from lab.servers.clients import redact


def _backend(url: str, ttl: float) -> OnceRedis:
    """The library's backend on a client of its own for url (see the module docstring for why)."""
    backend = OnceRedis({"url": url, "default_timeout": ttl})
    backend._redis = redis.StrictRedis(**parse_url(url), socket_timeout=ttl, socket_connect_timeout=ttl)
    return backend


class CeleryOnceRedis(UnfencedRedisLease):
    """celery-once's Redis backend: raise_or_lock(key, timeout=TTL); clear_lock(key). No renewal, no fencing."""

    name = "celery_once"
    summary = "celery-once Redis backend raise_or_lock(timeout=TTL), clear_lock(); no renewal, no fencing"
    library = "celery-once"
    renews = False  # the library has no way to extend its key

    @classmethod
    def cannot_run(cls, services) -> str | None:
        """Measured: the library's own client, built from this Redis's URL as the library builds it, answers a PING.
        celery-once's parse_url keeps a URL's password and drops its user name, so it cannot log in as a Redis
        ACL user (measured on Redis 7 with an ACL user: AuthenticationError), and it has no Sentinel support: its
        parse_url raises ValueError('Unsupported protocol redis+sentinel')."""
        try:
            backend = _backend(services.redis(), 5.0)  # parse_url refuses a redis+sentinel:// address (ValueError)
        except Exception as exc:
            return f"celery-once's parse_url refuses the address's form: {describe_error(exc)}"
        try:
            backend.redis.ping()
        except Exception as exc:
            user = urlsplit(services.redis()).username
            refused = isinstance(exc, (redis.exceptions.AuthenticationError, redis.exceptions.ResponseError))
            why = f" (its parse_url drops the URL's user name {user!r})" if user and refused else ""
            return f"celery-once cannot use the Redis at {redact(services.redis())}{why}: {describe_error(exc)}"
        finally:
            backend.redis.close()
        return None

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self.backend = _backend(ctx.lock_services.redis(), self.ttl)
        self.name_in_redis = f"locklab:{key}"
        self.granted: bytes | None = None  # the key's value right after this run's grant

    def _try_acquire(self) -> int | None:
        try:
            self.backend.raise_or_lock(self.name_in_redis, timeout=self.ttl)
        except AlreadyQueued:
            return None
        self.granted = self.backend.redis.get(self.name_in_redis)
        return 0

    def _renew(self) -> bool:
        return False

    def _owned(self) -> bool:
        return self.granted is not None and self.backend.redis.get(self.name_in_redis) == self.granted

    def _release(self) -> bool:
        ours = self._owned()
        self.granted = None
        self.backend.clear_lock(self.name_in_redis)  # the library's release: DEL, whoever holds the key now
        return ours

    def bare_call(self, key: str) -> BareCall | None:
        backend = _backend(self.ctx.lock_services.redis(), self.ttl)

        def acquire() -> bool:
            try:
                backend.raise_or_lock(f"locklab:{key}", timeout=self.ttl)
            except AlreadyQueued:
                return False
            return True

        return BareCall("celery-once Redis.raise_or_lock(key, timeout); clear_lock(key)", acquire,
                        lambda: backend.clear_lock(f"locklab:{key}"), backend.redis.close)

    def close(self) -> None:
        super().close()
        self.backend.redis.close()
