"""One trial as a scenario runs it: what it is (TrialSpec), its environment (TrialEnv: the servers, tables and
backends it may use), how long it waited on its timers (WaitMeter), and the Skip a trial raises where it cannot run.

Apart from scenarios/base.py so that the pacing hooks and the shared events read a trial without the Scenario
class, and the Scenario class reads them: no circle of imports.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import Engine

from backends import load as load_backend
from backends.base import Backend, BackendContext
from lab.errors import Interrupted, LockLost
from lab.servers.postgres.drivers import DEFAULT as DEFAULT_DRIVER
from lab.servers.services import Services
from lab.workload.table import CompanyTable, table_name

class Skip(Exception):
    """Raised by a trial that cannot run here (e.g. a server too old for a setting)."""


@dataclass(frozen=True)
class TrialSpec:
    """One planned trial; its id is stable across runs of the same plan."""

    scenario: str
    backend: str
    variant: str
    index: int
    skip: str | None = None
    driver: str = DEFAULT_DRIVER  # how the lock's PostgreSQL connection is made (lab/servers/postgres/drivers.py)

    @property
    def label(self) -> str:
        """The backend as results name it: with its driver when that is not the default."""
        return self.backend if self.driver == DEFAULT_DRIVER else f"{self.backend}@{self.driver}"

    @property
    def id(self) -> str:
        return f"{self.scenario}/{self.label}/{self.variant}/{self.index}"


class WaitMeter:
    """Seconds a trial spent waiting on its timers, waits on several of its threads at once counted once."""

    def __init__(self) -> None:
        self.total = 0.0
        self._in_progress = 0
        self._since = 0.0
        self._lock = threading.Lock()

    def begins(self) -> None:
        with self._lock:
            if self._in_progress == 0:
                self._since = time.monotonic()
            self._in_progress += 1

    def ends(self) -> None:
        with self._lock:
            self._in_progress -= 1
            if self._in_progress == 0:
                self.total += time.monotonic() - self._since


@dataclass
class TrialEnv:
    """What a running trial may use: servers, shared pools, a unique key space, and the stop flag."""

    services: Services
    monitor: Engine
    writes: Engine
    run_id: str
    spec: TrialSpec
    params: dict
    stop: threading.Event = field(default_factory=threading.Event)
    results_dir: Path | None = None  # the run's folder, for files a trial keeps (hypothesis' examples)
    # The timers it sat through in pause/wait_until, which no scheduler can shorten (lower_bound in
    # lab/runner/pacing.py). One meter per trial, shared by the copies a scenario makes with dataclasses.replace
    # (its own servers).
    meter: WaitMeter = field(default_factory=lambda: WaitMeter(), repr=False)

    @property
    def waited(self) -> float:
        """Seconds this trial spent in pause/wait_until, its threads' waits overlapping counted once."""
        return self.meter.total

    def options(self, options: dict | None = None) -> dict:
        """A backend's options for this trial: the given ones, and its driver when not the default."""
        driver = {} if self.spec.driver == DEFAULT_DRIVER else {"driver": self.spec.driver}
        return {**driver, **(options or {})}

    def key(self, suffix: str = "lock") -> str:
        """A lock name no other trial, run or user of the database shares."""
        return f"locklab:{self.run_id}:{self.spec.id}:{suffix}"

    def backend(self, name: str | None = None, *, lock_settings: dict | None = None,
                table: CompanyTable | None = None, key: str | None = None,
                options: dict | None = None, writes: Engine | None = None,
                routed: Services | None = None) -> Backend:
        """A new instance of the trial's backend (a holder or a contender); writes defaults to the shared pool.

        routed: where its lock connection goes instead of the servers themselves (a fault's proxy).
        """
        cls = load_backend(name or self.spec.backend)
        ctx = BackendContext(self.services, self.monitor, writes or self.writes, table,
                             dict(lock_settings or {}), self.options(options), routed=routed)
        return cls(ctx, key or self.key())

    def contender_gets_in(self, **backend_kwargs) -> bool:
        """A second run tries once for the lock: True if it got it (and then gave it back). A release that
        raises LockLost does not undo the grant it answers for: its lease may have lapsed meanwhile, or its
        library failed to say (measured: aioredlock's get_lock raised IndexError in 4 of 20 of one backend's
        timing trials in a full run, which had made those trials errors)."""
        contender = self.backend(**backend_kwargs)
        try:
            got = contender.acquire()
            if got:
                try:
                    contender.release()
                except LockLost:
                    pass
            return got
        finally:
            contender.close()

    def table(self, label: str = "rows", index: bool = True) -> CompanyTable:
        """A fresh company_rows table of this trial's own (dropped with the lab's schema)."""
        table = CompanyTable(table_name(f"{self.run_id}_{self.spec.id}_{label}"))
        table.create(self.monitor, index=index)
        return table

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """A wait no scheduler can shorten that is not one of the trial's own sleeps: a fault striking and being
        confirmed (a server restarting, a replica promoted), a contender trying for its declared patience.
        Counted in the trial's floor, as pause() is (lab/runner/pacing.py lower_bound)."""
        self.meter.begins()
        try:
            yield
        finally:
            self.meter.ends()

    def pause(self, seconds: float) -> None:
        """Hold for seconds (a run keeping its transaction open), waking at once if the run is stopped."""
        self.wait_until(time.monotonic(), seconds)

    def wait_until(self, t0: float, seconds: float) -> None:
        """Sleep until t0 + seconds on the monotonic clock, waking at once if the run is stopped."""
        remaining = t0 + seconds - time.monotonic()
        if remaining <= 0:
            return
        self.meter.begins()
        try:
            stopped = self.stop.wait(remaining)
        finally:
            self.meter.ends()
        if stopped:
            raise Interrupted()
