"""aioredlock 0.7 over the lab's Redlock masters, as its README shows it: Aioredlock(redis_connections), lock(resource),
unlock(lock), with the library's own auto-extension.

What the library promises: Redlock over independent masters (SET if absent or ours, PX, by Lua; a
uuid4 per lock), and, when lock() is given no lock_timeout, a watchdog task of its own that extends the
lock every 0.6 x internal_lock_timeout for as long as it is held; here internal_lock_timeout is the TTL.
A failed extension is logged at DEBUG and unlocks the lock (lock.valid = False): its holder hears
nothing. get_lock(resource, id) reads the TTL only while the lock is that id's (held() uses it); unlock()
raises LockError when another lock has the key, and returns quietly when the key lapsed and nobody
took it, so the adapter asks get_lock first and its own release never claims a lock it had lost. No fencing.

It needs aioredis < 2 (aioredis 1.3.1, abandoned since 2021, superseded by redis-py's asyncio client).
Measured here: it installs beside the lab's packages (`pip check` finds no conflict: aioredis 1.3 is a
package of its own, not redis-py) and imports and locks on Python 3.11 against the lab's Redis 6.2 and 7.
aioredis 1.3 has no command timeout, so a cut leaves a call waiting: the lab bounds each call by 3 TTL.

What the lab found (quick run of every scenario): its extension is the lock script itself, which sets the
key when it is absent, so after a pause (the lease lapsed, a contender wrote and gave the lock back) the
watchdog takes the lock back and the holder writes on: held() says yes, release() succeeds, and nothing
ever told the holder. A cut, a restart without AOF, a Redlock master restarted empty, the timing runs'
lapses and a kill-point search all let a stale write through.

The lock is a coroutine API: each instance runs an event loop of its own on a thread (lab/servers/postgres/drivers.py's
_Loop, as redis_asyncio does); a pause stops that thread with the rest of the holder, watchdog included.
"""

from __future__ import annotations

from aioredlock import Aioredlock, LockError

from backends._lease import LeaseBackend
from backends.base import BareCall
from lab.declarations.capabilities import Capability
from lab.servers.postgres.drivers import _Loop


class AioredlockLock(LeaseBackend):
    """Aioredlock(masters, retry_count=1, internal_lock_timeout=TTL).lock(resource): auto-extended by its watchdog."""

    name = "aioredlock"
    summary = "aioredlock 0.7 (aioredis 1.3) over 3 Redis masters, lock() auto-extended by its own watchdog; no fencing"
    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.EXCLUSION})
    library = "aioredlock"
    packages = ("aioredis",)
    services = ("postgres", "redlock")
    renews = False  # its watchdog does, every 0.6 TTL

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self.loop = _Loop()
        self.resource = f"locklab:{key}"
        self.manager = self._manager(ctx.lock_services.redlock())
        self.lock = None

    def _manager(self, urls: list[str]) -> Aioredlock:
        # One attempt per acquire (1 is its least): the lab asks again itself.
        return Aioredlock(redis_connections=list(urls), retry_count=1, internal_lock_timeout=self.ttl)

    def _run(self, coroutine):
        return self.loop.run(coroutine, timeout=max(5.0, 3 * self.ttl))

    def _try_acquire(self) -> int | None:
        try:
            self.lock = self._run(self.manager.lock(self.resource))
        except LockError:
            return None
        return 0

    def _renew(self) -> bool:
        return False

    def _owned(self) -> bool:
        if self.lock is None:
            return False
        try:
            self._run(self.manager.get_lock(self.resource, self.lock.id))
        except LockError:
            return False
        return True

    def _release(self) -> bool:
        """unlock(), after asking whether the lock is still this one's: unlock() raises LockError only when
        another lock has the key, and returns quietly when the key has lapsed and nobody took it (measured:
        a paused holder's release claimed success), so on its own it would lie."""
        if self.lock is None:
            return False
        ours = self._owned()
        lock, self.lock = self.lock, None
        self._run(self.manager.unlock(lock))  # LockError when a majority has it as another lock's
        return ours

    def bare_call(self, key: str) -> BareCall | None:
        """The library's lock() and unlock() on a manager and an event loop of their own."""
        loop = _Loop()
        manager = self._manager(self.ctx.lock_services.redlock())
        taken: list = []

        def acquire() -> bool:
            taken.append(loop.run(manager.lock(f"locklab:{key}")))
            return True

        def close() -> None:
            try:
                loop.run(_quiet_close(manager), timeout=5)
            finally:
                loop.close()

        return BareCall("aioredlock Aioredlock.lock(resource) (auto-extended); unlock(lock), each awaited on its loop",
                        acquire, lambda: loop.run(manager.unlock(taken.pop())), close)

    def abandon(self) -> None:
        self._stop.set()
        self.close()  # closes its connections without unlocking: what a killed process leaves

    def close(self) -> None:
        super().close()
        if self.loop is None:
            return
        try:
            self._run(_quiet_close(self.manager))
        except Exception:
            pass  # a cut or killed server: the sockets go with the loop
        finally:
            self.loop.close()
            self.loop = None


async def _quiet_close(manager: Aioredlock) -> None:
    """Stop its watchdogs and close its connections, unlocking nothing (destroy() would unlock every lock)."""
    for watchdog in list(manager._watchdogs.values()):
        watchdog.cancel()
    manager._watchdogs.clear()
    await manager.redis.clear_connections()
