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
from backends.base import Backend, BackendContext, BareCall
from lab import faults, preflight
from lab.errors import LabError, LockLost
from lab.faults import FaultNotConfirmed, Target
from lab.servers import sessions
from lab.servers.services import ExternalAddresses, Services, start_services
from lab.servers.stores import run_engines, writes_engine
from lab.workload.table import CompanyTable, drop_schema, ensure_schema, table_name

COMPANY, ROWS, TTL_S = 1, 250, 1.0


@dataclass
class Promise:
    name: str
    kept: bool | None  # None: could not be checked here, with the reason in `detail`
    detail: str = ""

    def line(self) -> str:
        mark = {True: "ok    ", False: "BROKEN", None: "skip  "}[self.kept]
        return f"{mark} {self.name}" + (f": {self.detail}" if self.detail else "")


class StepFailed(Exception):
    """The plugin's own code raised at one step: a broken promise named after that step, never a traceback."""

    def __init__(self, step: str, exc: BaseException):
        super().__init__(step)
        self.step, self.exc = step, exc

    def promise(self) -> Promise:
        return Promise(self.step, False, f"it raised {one_line(self.exc)}")


def one_line(exc: BaseException) -> str:
    """The exception's type and the first line of its message (SQLAlchemy's run to a dozen lines)."""
    message = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    message = message if len(message) <= 200 else message[:197] + "..."
    return type(exc).__name__ + (f": {message}" if message else "")


def step(name: str, fn, *args, passes: tuple[type[BaseException], ...] = ()):
    """Call the plugin's fn; any exception but those in `passes` becomes StepFailed(name)."""
    try:
        return fn(*args)
    except passes:
        raise
    except Exception as exc:
        raise StepFailed(name, exc) from exc


class _Bench:
    """The servers, pools and a seeded table for one backend's checks."""

    def __init__(self, services: Services, cls: type[Backend]):
        self.services, self.cls = services, cls
        # On the server its company rows live on (PostgreSQL, or MariaDB for a MariaDB lock).
        self.monitor, self.writes = run_engines(services, cls.writes_to)
        # A schema that was there before (a run's, the test session's) stays: the checks remove only their own.
        self.owns_schema = ensure_schema(self.monitor)
        step("its ddl (created in the lab's schema)", backends.prepare_storage, self.monitor, [cls.name])
        self.table = CompanyTable(table_name(f"contract_{cls.name}_{time.monotonic_ns()}"))
        self.table.create(self.monitor)
        self.table.seed(self.writes, COMPANY, ROWS)
        self.made: list[Backend] = []

    def backend(self, key: str, *, writes=None, routed: Services | None = None) -> Backend:
        ctx = BackendContext(self.services, self.monitor, writes or self.writes, self.table, {},
                             {"ttl_s": TTL_S}, routed=routed)
        made = step(f"{self.cls.__name__}(ctx, key)", self.cls, ctx, key)
        self.made.append(made)
        return made

    def close(self) -> list[Promise]:
        """Close every instance made; a close() that raises is a broken promise (the first one is reported)."""
        failed = []
        for made in self.made:
            try:
                made.close()
            except Exception as exc:
                failed.append(exc)
        if self.owns_schema:
            drop_schema(self.monitor)
        else:
            with self.monitor.begin() as conn:
                conn.execute(text(f"drop table if exists {self.table.name}"))
        self.monitor.dispose()
        self.writes.dispose()
        return [StepFailed("close()", failed[0]).promise()] if failed else []


def check(cls: type[Backend], services: Services) -> list[Promise]:
    """Every promise, in order; the first step whose plugin code raises is the last line, broken."""
    out: list[Promise] = []
    try:
        bench = _Bench(services, cls)
    except StepFailed as exc:
        return [exc.promise()]
    try:
        _promises(bench, cls, f"locklab:contract:{cls.name}:{time.monotonic_ns()}", out)
    except StepFailed as exc:
        out.append(exc.promise())
    finally:
        out += bench.close()
    return out


def _promises(bench: _Bench, cls: type[Backend], key: str, out: list[Promise]) -> None:
    first, second = bench.backend(key), bench.backend(key)
    got = step("acquire()", first.acquire)
    out.append(Promise("acquire() takes a fresh lock", got is True, "" if got else f"returned {got!r}"))
    if not got:
        return
    result = step("rebuild()", first.rebuild, COMPANY, ROWS, "first")
    out.append(Promise("rebuild() commits one whole company", result.outcome == "committed"
                       and result.deleted == ROWS, "" if result.outcome == "committed" else
                       f"{result.outcome}: {result.error}"))
    if not cls.holds_across_writes():
        out.append(Promise("held() claims nothing between writes (no run-level lock declared)",
                           step("held()", first.held) is False))
        step("release()", first.release)
        out += filter(None, [_bare_call(bench, key + ":bare")])
        out.append(_routable(bench, cls, key + ":route"))
        return
    out.append(Promise("held() says the lock is held", step("held()", first.held) is True))
    refused = step("acquire() by a second run", second.acquire) is False
    out.append(Promise("a second run is refused while the first holds", refused))
    _after_loss(bench, cls, first, second, out)
    out += filter(None, [_bare_call(bench, key + ":bare")])
    out.append(_routable(bench, cls, key + ":route"))


def _after_loss(bench: _Bench, cls, first: Backend, second: Backend, out: list[Promise]) -> None:
    """Take the lock away for real (its session ended, its lease left to lapse), then ask the holder."""
    step("suspend()", first.suspend, 30 * TTL_S)  # no renewals from here on: the lease lapses as a paused holder's would
    pid = step("lock_pid", lambda: first.lock_pid)
    if pid is not None:
        faults.terminate_confirmed(bench.monitor, pid)
    deadline = time.monotonic() + 4 * TTL_S + 2
    taken = False
    while not taken and time.monotonic() < deadline:
        taken = step("acquire() by a second run after the first lost its lock", second.acquire)
        if not taken:
            time.sleep(0.1)  # the lock's server decides when it lapses; ask again
    if not taken:
        reason = "could not take the lock away within 4 TTL (a library thread keeps renewing it?)"
        out += [Promise("held() tells the truth after a loss", None, reason),
                Promise("release() after a loss raises LockLost", None, reason)]
        return
    held = step("held() after a loss", first.held)
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
                           f"it raised {one_line(exc)}, not LockLost"))
    still = step("the second run's held()", second.held)
    out.append(Promise("the first run's release leaves the second run's lock alone", still is True,
                       "" if still else "after the first run's release the second run no longer holds"))
    step("the second run's release() (after the first lost its lock)", second.release)


def _bare_call(bench: _Bench, key: str) -> Promise | None:
    """The library call the cost table times it against takes and gives back the lock, with the library alone."""
    name = "bare_call() takes and releases the lock with the library alone"
    backend = bench.backend(key)
    bare = step("bare_call()", backend.bare_call, key)
    if bare is None:  # it names no library call it wraps: nothing to check (the cost table says so)
        return None
    if not isinstance(bare, BareCall):
        return Promise(name, False, f"it returned {type(bare).__name__}, not a BareCall or None")
    try:
        got = step(f"the bare call's acquire ({bare.call})", bare.acquire)
        if not got:
            return Promise(name, False, f"its acquire returned {got!r} for a lock nobody held")
        step(f"the bare call's release ({bare.call})", bare.release)
        return Promise(name, True)
    finally:
        step(f"the bare call's close ({bare.call})", bare.close)


def _routable(bench: _Bench, cls, key: str) -> Promise:
    """The lock connection goes where ctx.lock_services (or, for a lock in the write, ctx.writes) says."""
    name = "the lock connection follows ctx.lock_services, so a cut's proxy can carry it"
    cut = faults.load("cut")
    reason = cut.applies_to(cls)
    if reason is not None:
        return Promise(name, None, reason)
    route = cut.route(bench.services, cls)
    writes = writes_engine(bench.services, cls.writes_to, {}, route.writes_url, pool_size=1) \
        if route.writes_url is not None else None
    try:
        backend = bench.backend(key, writes=writes, routed=route.lock_services)
        if not step("acquire() through the proxy", backend.acquire):
            return Promise(name, False, "acquire() through the proxy was refused")
        write_pid = None
        if writes is not None:  # the lock lives in the write: that connection is the one to carry
            with writes.connect() as conn:
                write_pid = sessions.session_id(conn)
            step("rebuild() through the proxy", backend.rebuild, COMPANY, ROWS, "routed")
        try:
            lock_pid = step("lock_pid", lambda: backend.lock_pid)
            cut.confirm(Target(bench.services, bench.monitor, cls, lock_pid=lock_pid, write_pid=write_pid))
        except FaultNotConfirmed as exc:
            return Promise(name, False, str(exc))
        finally:
            step("release() through the proxy", backend.release)
        return Promise(name, True)
    finally:
        cut.close()
        if writes is not None:
            writes.dispose()


def check_backend(name: str, services: Services | None = None, external: ExternalAddresses | None = None,
                  gate: preflight.Gate | None = None) -> int:
    """Print each promise of the backend registered as name; 1 when any is broken, else 0.

    `services`: servers already started (the tests'); by default the lab starts the backend's own, or uses those
    given by `external` (flags or environment) once the preflight (`gate`, when the caller looked ahead) found it
    can measure through them."""
    if name not in backends.names():
        raise LabError(f"unknown backend {name!r}; see 'lab list'")
    cls = backends.load(name)
    if services is None:
        with start_services(set(cls.services) | {"postgres"}, external, check=gate or preflight.Gate()) as started:
            return check_backend(name, started)
    try:
        reason = step("cannot_run()", cls.cannot_run, services)
    except StepFailed as exc:
        promises = [exc.promise()]
    else:
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
