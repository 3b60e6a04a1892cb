"""Backends that break one promise on purpose, for tests that must see the lab catch it.

They live in a module of their own so a holder process can load them by entry
("tests.server.planted_backends:Class") without importing a test module.
"""

import time

from backends.redis_lock import RedisLock
from backends.session_autocommit import SessionLockAutocommit


class IgnoresTheRoute(SessionLockAutocommit):
    """Opens its lock connection to the server directly, whatever address the lab routes it to."""

    name = "planted_ignores_route"

    def __init__(self, ctx, key):
        ctx.routed = None
        super().__init__(ctx, key)


class DeclaredUnroutable(SessionLockAutocommit):
    """Says, by declaration, that no proxy can carry its lock connection."""

    name = "planted_unroutable"
    lock_routable = False


class PluginBug(Exception):
    """What a library raises from deep inside when a plugin misuses it: a message of several lines."""


class RaisesAt(SessionLockAutocommit):
    """Raises PluginBug at one step of `lab check-backend` (its `step`), as a first plugin's library might.

    "second_release" raises only in the second instance's release(), the step of issue 33's traceback."""

    name = "planted_raises"
    step = ""
    made = 0

    @classmethod
    def _bug(cls, where: str) -> None:
        if cls.step == where:
            raise PluginBug(f"planted in {where}()\n  (background on this error at: https://example.invalid)")

    @classmethod
    def cannot_run(cls, services):
        cls._bug("cannot_run")
        return super().cannot_run(services)

    def __init__(self, ctx, key):
        self._bug("init")
        super().__init__(ctx, key)
        type(self).made += 1
        self.index = type(self).made

    def acquire(self):
        self._bug("acquire")
        return super().acquire()

    def rebuild(self, company, rows, run_id, point=None):
        self._bug("rebuild")
        return super().rebuild(company, rows, run_id) if point is None else super().rebuild(company, rows, run_id, point)

    def held(self):
        self._bug("held")
        return super().held()

    def release(self):
        self._bug("release")
        if self.index == 2:
            self._bug("second_release")
        super().release()

    def bare_call(self, key):
        self._bug("bare_call")
        from backends.base import BareCall

        bare = type(self).__new__(type(self))
        SessionLockAutocommit.__init__(bare, self.ctx, key)
        return BareCall("planted: the backend's own acquire and release", bare.acquire,
                        lambda: SessionLockAutocommit.release(bare), lambda: SessionLockAutocommit.close(bare))

    def close(self):
        super().close()
        self._bug("close")


# One class per step, so a registry entry ("module:Class") names each.
STEPS = ("cannot_run", "init", "acquire", "rebuild", "held", "release", "second_release", "bare_call", "close")
for _step in STEPS:
    globals()[f"RaisesAt_{_step}"] = type(f"RaisesAt_{_step}", (RaisesAt,), {"name": f"planted_raises_{_step}",
                                                                             "step": _step, "__module__": __name__})


class RenewsByTheWallClock(RedisLock):
    """redis-py's Lock renewed every TTL/3 on a schedule kept by the wall clock ("next renewal at time.time() +
    interval"), as a library that computes its renewals from datetime.now() would: what the holder-clock fault
    must catch (no library the lab adapts does this, measured)."""

    name = "planted_wall_clock_renewal"
    renews = True

    def _renew_until(self, stop) -> None:
        due = time.time() + self.ttl / 3
        while not stop.wait(0.02):
            if time.time() < due:
                continue
            try:
                alive = self._renew()
            except Exception:  # the lease is someone else's: this planted library says nothing more
                alive = False
            if not alive and self.noticed_loss_at is None:
                self.noticed_loss_at, self.noticed_loss_how = time.monotonic(), "returned False"
            due = time.time() + self.ttl / 3


class AlwaysGrants(SessionLockAutocommit):
    """Says it was granted whatever the server answered, and that it still holds: a second run is let in while the
    first holds, the one promise a lock exists for broken. What the checkers must catch in the subject of a shared
    fault event that runs it, and nowhere beside it."""

    name = "planted_always_grants"

    def acquire(self):
        super().acquire()
        return True

    def held(self):
        return True

    def release(self):
        try:
            super().release()
        except Exception:  # it held nothing: this planted lock says nothing of it
            pass
