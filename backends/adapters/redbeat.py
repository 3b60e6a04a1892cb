"""celery-redbeat's beat lock, as a beat takes it: the library's beat_init receiver acquires it when a beat starts,
every tick() of the RedBeatScheduler extends it, and the scheduler's close() gives it back.

What the library does (celery-redbeat 2.4, redbeat/schedulers.py): `acquire_distributed_beat_lock`, connected to
Celery's beat_init signal, takes redis-py's Lock on `<prefix>:lock` with timeout = lock_timeout, blocking (a
second beat waits in it, trying every max_interval), and swaps in a Lua extend that sets the key's TTL back to
lock_timeout after checking the token (sibson/redbeat#127's fix); each tick() calls lock.extend(lock_timeout),
which raises LockNotOwnedError once the key is another's; close() releases only if lock.owned(). No fencing.
Celery's signal dispatch logs and swallows an exception from the receiver (sibson/redbeat#208), leaving the
scheduler with no lock.

Here a run is a beat: its RedBeatScheduler on an app of its own (redbeat_redis_url the lock's Redis, a key prefix
of the run's key, redbeat_lock_timeout the TTL in whole seconds, beat_max_loop_interval TTL/5: a waiting beat
tries five times a TTL; redbeat_redis_options' socket_timeout the TTL, as a user bounds a dead connection).
acquire() sends beat_init as beat does at start, on the beat's own thread (every call of the scheduler runs there:
redis-py keeps the Lock's token thread-local), and waits a moment, since the library's receiver blocks until it
gets the lock: True once the receiver has set scheduler.lock. The lab's keep-alive plays the beat loop, calling
the scheduler's own tick() every TTL/3; held() is the lock's own owned(); release() is the scheduler's close().
A beat closed while its receiver still waits is given back the lock by the library's close() the moment the
receiver gets it (the key frees within a TTL).

redbeat's lock_timeout is whole seconds (tick() extends by int(lock_timeout)): the TTL is rounded up to one.
"""

from __future__ import annotations

import math
from concurrent.futures import Future, ThreadPoolExecutor, wait
from itertools import count

from celery import Celery
from celery.signals import beat_init
from redbeat import RedBeatScheduler
from redbeat.schedulers import get_redis

from backends.adapters._redis_lease import UnfencedRedisLease
from backends.base import describe_error
from lab.servers.clients import is_sentinel_url
from lab.declarations.skips import NotRun

GRANT_WAIT_S = 0.2  # how long acquire() gives the receiver before saying "not yet" while another beat holds the key
FREE_WAIT_S = 10.0  # how long it gives the receiver when nobody holds the key (its first try, on a busy machine)
_apps = count()


class _Beat:
    """What a beat Service is to beat_init's receivers (its scheduler, its app): the sender the signal is sent with."""

    def __init__(self, scheduler: RedBeatScheduler, app: Celery):
        self.scheduler, self.app = scheduler, app


class RedBeatLock(UnfencedRedisLease):
    """A beat: RedBeatScheduler's lock taken by the beat_init receiver, extended by tick(), released by close()."""

    name = "redbeat"
    summary = "celery-redbeat's beat lock: taken at beat_init, extended by each tick(), released by close(); no fencing"
    library = "celery-redbeat"
    renews = True  # the lab's keep-alive calls the scheduler's own tick() every TTL/3, as the beat loop would

    @classmethod
    def cannot_run(cls, services) -> str | None:
        if is_sentinel_url(services.redis_url):  # RedBeat can use Sentinels; the lab does not build its form: not run
            return NotRun("the lab's Sentinel address has no RedBeat form: RedBeat reads its Sentinels from "
                          "redbeat_redis_options and a redis-sentinel:// URL, which the lab does not build")
        return None

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        seconds = max(1, math.ceil(self.ttl))  # redbeat extends by int(lock_timeout): whole seconds
        self.ttl = float(seconds)
        self.app = Celery(f"locklab-redbeat-{next(_apps)}", set_as_current=False)
        self.app.conf.update(redbeat_redis_url=ctx.lock_services.redis(), redbeat_key_prefix=f"locklab:{key}",
                             redbeat_lock_timeout=seconds, beat_max_loop_interval=seconds / 5,
                             redbeat_redis_options={"socket_timeout": seconds, "socket_connect_timeout": seconds})
        self.scheduler = RedBeatScheduler(self.app, lock_timeout=seconds)
        self.beat = _Beat(self.scheduler, self.app)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="redbeat-beat")  # the beat's one thread
        self._starting: Future | None = None
        self._closed = False
        self.start_error: str | None = None  # what the receiver raised, which Celery's dispatch swallowed

    def _on_beat(self, call):
        """Run call on the beat's own thread: redis-py keeps the Lock's token thread-local, so the receiver that took
        it and every tick, owned() and close() after it run on one thread, as in a beat process."""
        return self._thread.submit(call).result()

    def _start_beat(self) -> None:
        """beat_init, as beat sends it at start; a grant that comes after close() is given back at once."""
        for receiver, answer in beat_init.send(sender=self.beat):
            if isinstance(answer, Exception):
                self.start_error = describe_error(answer)
        if self._closed and self.scheduler.lock is not None:
            self.scheduler.close()

    def _try_acquire(self) -> int | None:
        if self.scheduler.lock is not None and not self._owned():
            # A receiver left waiting by an earlier "not yet" got the lock while nobody kept it alive, and it lapsed:
            # a beat that finds its lock gone starts again, as the library's tick() would make it stop.
            self._on_beat(self.scheduler.close)
        if self.scheduler.lock is None and (self._starting is None or self._starting.done()):
            self._starting = self._thread.submit(self._start_beat)
        if self._starting is not None:
            wait([self._starting], timeout=GRANT_WAIT_S)
            if self.scheduler.lock is None and not self._key_held():
                wait([self._starting], timeout=FREE_WAIT_S)  # nobody holds it: the receiver's first try is coming
        return 0 if self.scheduler.lock is not None else None

    def _key_held(self) -> bool:
        """Whether another beat holds the lock now (its key exists), read with the scheduler's own client."""
        try:
            return bool(get_redis(self.app).exists(self.scheduler.lock_key))
        except Exception:  # a server a fault took away: as good as held, for how long to wait
            return True

    def _renew(self) -> bool:
        self._on_beat(self.scheduler.tick)  # lock.extend(lock_timeout): LockNotOwnedError once the key is another's
        return True

    def _owned(self) -> bool:
        lock = self.scheduler.lock
        return lock is not None and bool(self._on_beat(lock.owned))

    def _release(self) -> bool:
        ours = self._owned()
        self._on_beat(self.scheduler.close)  # the library's: releases the lock if it owns it, then forgets it
        return ours

    def close(self) -> None:
        """The beat goes away without a release (release() is the scheduler's close()): a lock it holds lapses within
        its TTL, as a stopped beat's does; a receiver still waiting gives back what it gets at once."""
        super().close()
        self._closed = True
        self._thread.shutdown(wait=False)
