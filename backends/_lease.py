"""A lease held outside the writes' transaction: taken once per run, kept alive, maybe fenced.

Subclasses supply four round trips to their lock service (try, renew, owned,
release); this base keeps the lease alive from a thread, notes when renewal
first fails (the moment the holder could have noticed), and routes writes
through the fence when the backend declares `fencing`.
"""

from __future__ import annotations

import queue
import threading
import time
from abc import abstractmethod

from backends._fence import FENCES_DDL, fenced_write
from backends._writes import write_transaction
from backends.base import (
    Backend,
    BackendContext,
    Point,
    RebuildResult,
    describe_error,
    no_point,
)
from lab.declarations.capabilities import Capability
from lab.errors import LockLost

DEFAULT_TTL_S = 2.0


class LeaseBackend(Backend):
    """Base for lease_row, redis, etcd and their fenced forms."""

    renews: bool = True  # keep the lease alive from a thread while the run works
    ttl: float  # every lease has one: set from the options in __init__, then as its server granted it
    ddl = [FENCES_DDL]

    def __init__(self, ctx: BackendContext, key: str):
        super().__init__(ctx, key)
        self.ttl = float(ctx.options.get("ttl_s", DEFAULT_TTL_S))
        self.token: int | None = None
        self.noticed_loss_at: float | None = None  # monotonic time renewal first failed
        self.noticed_loss_how: str | None = None  # what renewal said then: "returned False" or the exception
        self._stop = threading.Event()  # the current grant's: set when its renewal must end
        self._suspended_until = 0.0
        self._keeper: threading.Thread | None = None
        self._grants: queue.SimpleQueue = queue.SimpleQueue()  # each grant's stop flag; None ends the keeper

    @property
    def fenced(self) -> bool:
        return Capability.FENCING in self.capabilities

    @abstractmethod
    def _try_acquire(self) -> int | None:
        """One attempt; the fencing token (or any int) when granted, None when another holds it."""

    @abstractmethod
    def _renew(self) -> bool:
        """Extend the lease; False when it is no longer ours."""

    @abstractmethod
    def _owned(self) -> bool:
        """Whether the lock service still has the lease as ours."""

    @abstractmethod
    def _release(self) -> bool:
        """Delete the lease if it is still ours; False when it was not."""

    def acquire(self) -> bool:
        self.token = self._try_acquire()
        if self.token is None:
            return False
        if self.renews:
            # Each grant has its own stop flag: the flag a release set must not end the next grant's renewal.
            self._stop.set()
            self._stop = threading.Event()
            if self._keeper is None:  # one thread per instance: starting one cost each acquire about 0.3 ms
                self._keeper = threading.Thread(target=self._keep_alive, name=f"keepalive-{self.name}", daemon=True)
                self._keeper.start()
            self._grants.put(self._stop)
        return True

    def suspend(self, seconds: float) -> None:
        self._suspended_until = time.monotonic() + seconds

    def abandon(self) -> None:
        self._stop.set()  # no more renewals, and no release: the lease runs out on the server
        self.close()

    def _keep_alive(self) -> None:
        """Renew each grant every TTL/3 from its acquire until its release, close or abandon."""
        while (stop := self._grants.get()) is not None:
            self._renew_until(stop)

    def _renew_until(self, stop: threading.Event) -> None:
        while not stop.wait(self.ttl / 3):
            if time.monotonic() < self._suspended_until:
                continue  # paused with the rest of the process
            try:
                alive, how = self._renew(), "returned False"
            except Exception as exc:  # unreachable service, or the library's "not yours any more"
                alive, how = False, f"raised {describe_error(exc)}"
            if not alive and self.noticed_loss_at is None:
                self.noticed_loss_at, self.noticed_loss_how = time.monotonic(), how

    def held(self) -> bool:
        try:
            return self.token is not None and self._owned()
        except Exception:  # cannot confirm it, so it is not known to be held
            return False

    def release(self) -> None:
        self._stop.set()
        try:
            released = self._release()
        except Exception as exc:
            raise LockLost(f"release failed: {type(exc).__name__}: {exc}") from exc
        if not released:
            raise LockLost("the lease was no longer ours at release", told="false")

    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        if self.fenced:
            return fenced_write(self.ctx.writes, self.ctx.company_table, company, rows, run_id,
                                lock_key=self.key, token=self.token, point=point)
        return write_transaction(self.ctx.writes, self.ctx.company_table, [company], rows, run_id, point=point)

    def close(self) -> None:
        self._stop.set()
        if self._keeper is not None:
            self._grants.put(None)
            self._keeper.join(self.ttl)
            self._keeper = None
