"""`lab check-backend`: the promises every backend makes, checked on real servers, one line each.

A backend that breaks one is mismeasured in every scenario, so its author should hear it first,
by name: a release that returns silently after its lock was lost, a held() that re-takes the lock,
a lock connection that a cut's proxy cannot carry.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import text

import backends
from backends.base import Backend, BackendContext
from lab import faults
from lab.errors import LabError, LockLost
from lab.faults import FaultNotConfirmed, Target
from lab.harness.workload import CompanyTable, drop_schema, ensure_schema, table_name
from lab.servers import pg
from lab.servers.clients import pg_engine
from lab.servers.services import Services, start_services

COMPANY, ROWS, TTL_S = 1, 250, 1.0


@dataclass
class Promise:
    name: str
    kept: bool | None  # None: could not be checked here, with the reason in `detail`
    detail: str = ""

    def line(self) -> str:
        mark = {True: "ok    ", False: "BROKEN", None: "skip  "}[self.kept]
        return f"{mark} {self.name}" + (f": {self.detail}" if self.detail else "")


class _Bench:
    """The servers, pools and a seeded table for one backend's checks."""

    def __init__(self, services: Services, cls: type[Backend]):
        self.services, self.cls = services, cls
        self.monitor = pg.monitor_engine(services)
        self.writes = pg.writes_engine(services)
        ensure_schema(self.monitor)
        backends.prepare_storage(self.monitor, [cls.name])
        self.table = CompanyTable(table_name(f"contract_{cls.name}_{time.monotonic_ns()}"))
        self.table.create(self.monitor)
        self.table.seed(self.writes, COMPANY, ROWS)
        self.made: list[Backend] = []

    def backend(self, key: str, *, writes=None, routed: Services | None = None) -> Backend:
        ctx = BackendContext(self.services, self.monitor, writes or self.writes, self.table, {},
                             {"ttl_s": TTL_S}, routed=routed)
        made = self.cls(ctx, key)
        self.made.append(made)
        return made

    def close(self) -> None:
        for made in self.made:
            try:
                made.close()
            except Exception:
                pass
        drop_schema(self.monitor)
        self.monitor.dispose()
        self.writes.dispose()


def check(cls: type[Backend], services: Services) -> list[Promise]:
    bench = _Bench(services, cls)
    try:
        return _promises(bench, cls, f"locklab:contract:{cls.name}:{time.monotonic_ns()}")
    finally:
        bench.close()


def _promises(bench: _Bench, cls: type[Backend], key: str) -> list[Promise]:
    out = []
    first, second = bench.backend(key), bench.backend(key)
    got = first.acquire()
    out.append(Promise("acquire() takes a fresh lock", got is True, "" if got else f"returned {got!r}"))
    if not got:
        return out
    result = first.rebuild(COMPANY, ROWS, "first")
    out.append(Promise("rebuild() commits one whole company", result.outcome == "committed"
                       and result.deleted == ROWS, "" if result.outcome == "committed" else
                       f"{result.outcome}: {result.error}"))
    if not cls.holds_across_writes():
        out.append(Promise("held() claims nothing between writes (no run-level lock declared)",
                           first.held() is False))
        first.release()
        out.append(_routable(bench, cls, key + ":route"))
        return out
    out.append(Promise("held() says the lock is held", first.held() is True))
    refused = second.acquire() is False
    out.append(Promise("a second run is refused while the first holds", refused))
    out += _after_loss(bench, cls, first, second)
    out.append(_routable(bench, cls, key + ":route"))
    return out


def _after_loss(bench: _Bench, cls, first: Backend, second: Backend) -> list[Promise]:
    """Take the lock away for real (its session ended, its lease left to lapse), then ask the holder."""
    first.suspend(30 * TTL_S)  # no renewals from here on: the lease lapses as a paused holder's would
    if first.lock_pid is not None:
        faults.terminate_confirmed(bench.monitor, first.lock_pid)
    deadline = time.monotonic() + 4 * TTL_S + 2
    taken = False
    while not taken and time.monotonic() < deadline:
        taken = second.acquire()
        if not taken:
            time.sleep(0.1)  # the lock's server decides when it lapses; ask again
    if not taken:
        reason = "could not take the lock away within 4 TTL (a library thread keeps renewing it?)"
        return [Promise("held() tells the truth after a loss", None, reason),
                Promise("release() after a loss raises LockLost", None, reason)]
    out = []
    held = first.held()
    out.append(Promise("held() tells the truth after a loss (and does not re-take the lock)", held is False,
                       "" if held is False else "held() returned True while another run held the lock"))
    try:
        first.release()
        out.append(Promise("release() after a loss raises LockLost", False,
                           "release() returned silently for a lock another run held: it must raise LockLost"))
    except LockLost:
        out.append(Promise("release() after a loss raises LockLost", True))
    except Exception as exc:
        out.append(Promise("release() after a loss raises LockLost", False,
                           f"it raised {type(exc).__name__}, not LockLost"))
    still = second.held()
    out.append(Promise("the first run's release leaves the second run's lock alone", still is True,
                       "" if still else "after the first run's release the second run no longer holds"))
    second.release()
    return out


def _routable(bench: _Bench, cls, key: str) -> Promise:
    """The lock connection goes where ctx.lock_services (or, for a lock in the write, ctx.writes) says."""
    name = "the lock connection follows ctx.lock_services, so a cut's proxy can carry it"
    cut = faults.load("cut")
    reason = cut.applies_to(cls)
    if reason is not None:
        return Promise(name, None, reason)
    route = cut.route(bench.services, cls)
    writes = pg_engine(route.writes_url, pool_size=1) if route.writes_url is not None else None
    try:
        backend = bench.backend(key, writes=writes, routed=route.lock_services)
        if not backend.acquire():
            return Promise(name, False, "acquire() through the proxy was refused")
        write_pid = None
        if writes is not None:  # the lock lives in the write: that connection is the one to carry
            with writes.connect() as conn:
                write_pid = conn.execute(text("select pg_backend_pid()")).scalar()
            backend.rebuild(COMPANY, ROWS, "routed")
        try:
            cut.confirm(Target(bench.services, bench.monitor, cls, lock_pid=backend.lock_pid, write_pid=write_pid))
        except FaultNotConfirmed as exc:
            return Promise(name, False, str(exc))
        finally:
            backend.release()
        return Promise(name, True)
    finally:
        cut.close()
        if writes is not None:
            writes.dispose()


def check_backend(name: str) -> int:
    """Print each promise of the backend registered as name; 1 when any is broken, else 0."""
    if name not in backends.names():
        raise LabError(f"unknown backend {name!r}; see 'lab list'")
    cls = backends.load(name)
    with start_services(set(cls.services) | {"postgres"}) as services:
        reason = cls.cannot_run(services)
        if reason is not None:
            print(f"{name} does not run against these servers: {reason}")
            return 1
        promises = check(cls, services)
    for promise in promises:
        print(promise.line())
    broken = [p for p in promises if p.kept is False]
    print(f"{name}: {len(promises) - len(broken)} of {len(promises)} promises kept"
          + (f", {len(broken)} broken" if broken else ""))
    return 1 if broken else 0
