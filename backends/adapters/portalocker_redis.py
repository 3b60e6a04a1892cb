"""portalocker's RedisLock, as its documentation shows it: RedisLock(channel, connection=redis_client).

What the library promises (portalocker 4.4's module docstring): the lock is not a key with a TTL but a
Redis pub/sub *subscription*. The holder subscribes to the lock's channel on a dedicated client of its
own (one more connection per lock, named `<channel>-lock-<holder id>`, built from the connection it is
given and never reconnected), and a background thread keeps reading it. A contender counts the
channel's subscribers, pings them on the channel and, when one does not answer within
`unavailable_timeout` (1 s), kills that subscriber's connection with CLIENT KILL and takes the lock.
There is no lease to renew and no expiry: ownership lasts as long as the subscription's connection
and its answers. When the holder's reader thread sees its connection die it records the loss
(`lost`, `ensure_held()` raises LockLostError, `on_lost` fires); by default 4.x also interrupts the
main thread with KeyboardInterrupt, which the adapter turns off (`interrupt_on_lost=False`, the
default from 5.0) so the lab's holder reports instead of dying. Its fencing token (`fencing=True`)
is left out here: the library only hands it out, the resource has to check it.

So it declares `connection_held`, not `lease_expiry`: nothing lapses on its own, which is why
`lab check-backend` cannot take it away by waiting, and a paused holder loses it only to a contender
that pings it and kills its silent connection. What the lab found (quick run of every scenario): held
through a kill, an overlap, a paused Redis and the timing grid; the stale write accepted with the holder
paused (the contender's ping went unanswered and it killed the holder's subscription), its connection
cut, Redis restarted, a caught-up failover and a kill-point search. The holder is told by the library's
ERROR log line ("lost its subscription connection") about 0.1 s after the contender's grant, before its
stale write, which goes ahead; nothing on a failover. Its acquire + release costs about 117 ms (the
library's subscribe and probe waits), 320 times a PING. The failover's "behind" column is n/a: no key.
"""

from __future__ import annotations

import time

import portalocker
from portalocker.redis import RedisLock
from redis.backoff import NoBackoff
from redis.retry import Retry

from backends._writes import write_transaction
from backends.base import Backend, BareCall, describe_error, no_point
from lab.declarations.capabilities import Capability
from lab.errors import LockLost
from lab.servers.clients import is_sentinel_url, redis_client


def _client(url: str, timeout: float):
    # decode_responses as the library's own default connection has it: its channel handler compares text.
    return redis_client(url, socket_timeout=timeout, socket_connect_timeout=timeout, decode_responses=True)


def _redis_lock(url: str, channel: str, connection, timeout: float, **options) -> RedisLock:
    """RedisLock(channel, connection=...) as its documentation shows it. Behind Sentinel its own derivation of
    the subscription client fails (it clones the command connection's pool, and redis-py's
    SentinelConnectionPool takes arguments it does not know: measured, LockException "could not derive a
    subscription client ... pass subscription_connection_factory"), so it gets the hook the library documents
    for Sentinel: a factory of fresh Sentinel-managed clients that never retry or reconnect (its condition for
    the loss guarantee), named as the library names its subscriber."""
    if not is_sentinel_url(url):
        return RedisLock(channel, connection=connection, interrupt_on_lost=False, **options)
    lock: RedisLock | None = None

    def subscription_client():
        assert lock is not None  # the library calls this from acquire(), after the lock exists
        return redis_client(url, socket_timeout=timeout, socket_connect_timeout=timeout, decode_responses=True,
                            protocol=2, client_name=lock.client_name, retry_on_timeout=False, retry_on_error=[],
                            retry=Retry(NoBackoff(), retries=0, supported_errors=()))

    lock = RedisLock(channel, connection=connection, interrupt_on_lost=False,
                     subscription_connection_factory=subscription_client, **options)
    return lock


class PortalockerRedisLock(Backend):
    """RedisLock(channel, connection=...): acquire(timeout=0, fail_when_locked=True), release(); held()
    asks the server whether the lock's own subscription client is still connected and subscribed."""

    name = "portalocker_redis"
    summary = "portalocker RedisLock (a pub/sub subscription on a client of its own; no TTL, no fencing)"
    capabilities = frozenset({Capability.CONNECTION_HELD, Capability.EXCLUSION})
    library = "portalocker"
    services = ("postgres", "redis")
    TIMEOUT_S = 2.0  # the socket timeout of the connection the lock is given (and its subscription inherits)

    @classmethod
    def cannot_run(cls, services) -> str | None:
        """Measured: one lock taken and given back on this Redis, with the commands the library needs."""
        client = _client(services.redis_url, cls.TIMEOUT_S)
        lock = _redis_lock(services.redis_url, f"locklab:probe:{time.monotonic_ns()}", client, cls.TIMEOUT_S)
        try:
            lock.acquire(timeout=0, fail_when_locked=True)
            lock.release()
        except Exception as exc:
            return f"portalocker RedisLock cannot take a lock on the Redis at {services.redis_url}: {describe_error(exc)}"
        finally:
            client.close()
        return None

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self.client = _client(ctx.lock_services.redis_url, self.TIMEOUT_S)
        self.monitor = _client(ctx.services.redis_url, self.TIMEOUT_S)  # the server's view, never through a proxy
        self.lock = self._lock(self.client, key)
        self.granted = False

    def _lock(self, client, key: str) -> RedisLock:
        return _redis_lock(self.ctx.lock_services.redis(), f"locklab:{key}", client, self.TIMEOUT_S,
                           on_lost=self._on_lost)

    def _on_lost(self, lock) -> None:  # the library's callback, on its reader thread
        if self.noticed_loss_at is None:
            self.noticed_loss_at, self.noticed_loss_how = time.monotonic(), "on_lost callback (lost=True)"

    def acquire(self) -> bool:
        try:
            self.lock.acquire(timeout=0, fail_when_locked=True)
        except portalocker.AlreadyLocked:
            return False
        self.granted = True
        return True

    def rebuild(self, company, rows, run_id, point=no_point):
        return write_transaction(self.ctx.writes, self.ctx.table, [company], rows, run_id, point=point)

    def held(self) -> bool:
        """The server's client list: is this lock's subscription client connected and subscribed?"""
        if not self.granted:
            return False
        try:
            clients = self.monitor.client_list()
        except Exception:
            return False
        return any(c.get("name") == self.lock.client_name and int(c.get("sub", 0)) > 0 for c in clients)

    def release(self) -> None:
        """Give the lock back; LockLost when it was not this run's any more (a release never lies): never
        granted or released already, its subscription gone from the server, or the library's own lost flag."""
        if not self.granted:
            raise LockLost("it was not held: never granted, or released already")
        subscribed, lost = self.held(), self.lock.lost
        self.granted = False
        try:
            self.lock.release()
        except Exception as exc:
            raise LockLost(f"release failed: {describe_error(exc)}") from exc
        if lost:  # the library had recorded the loss; its release() itself says nothing
            raise LockLost("portalocker had recorded the lock lost (lost=True) before release", told="false")
        if not subscribed:
            raise LockLost("its subscription was gone from the server before release: another run could have it",
                           told="false")

    def bare_call(self, key: str) -> BareCall | None:
        client = _client(self.ctx.lock_services.redis(), self.TIMEOUT_S)
        lock = _redis_lock(self.ctx.lock_services.redis(), f"locklab:{key}", client, self.TIMEOUT_S)
        return BareCall("portalocker RedisLock.acquire(timeout=0, fail_when_locked=True); release()",
                        lambda: lock.acquire(timeout=0, fail_when_locked=True), lock.release, client.close)

    def abandon(self) -> None:
        # A killed process: its sockets close, so the server drops the subscription; no release() runs.
        try:
            self.lock._close_subscription_client(None)
        except Exception:
            pass
        self.client.close()
        self.monitor.close()

    def close(self) -> None:
        if self.granted:
            try:
                self.lock.release()
            except Exception:
                pass
            self.granted = False
        self.client.close()
        self.monitor.close()
