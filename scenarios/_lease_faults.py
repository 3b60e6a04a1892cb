"""One trial shape for the faults that break leases: a holder hit mid-run, a contender, then the holder's write.

The holder (its own OS process) takes the lock and stops at its fault point:
before its write for a lock held across writes, inside the write (after the
delete) for a lock that lives in the write. The fault strikes (pause, cut,
restart) for longer than the TTL; a contender then tries to take the company and
rebuild it; the fault heals and the holder goes on to write. Whether the holder's
write is accepted after the contender took over is the measurement.

The holder's SQL sessions carry the post's guard of one TTL, as a database with that setting would give
them: idle_in_transaction_session_timeout on PostgreSQL, idle_transaction_timeout on MariaDB (a lock whose
company rows live there), each on the server it is set for (lab/servers/stores.py).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Sequence, TypeVar

import backends
from lab import faults
from lab.declarations.capabilities import Capability
from lab.checkers import ops
from lab.checkers.ops import F, Op, Recorder, Type
from lab.checkers.outcomes import DoesNotRun
from lab.checkers.told import signals
from lab.checkers.verdict import Verdict
from lab.errors import LabError
from lab.faults import Fault, Target
from lab.holder.process import HolderProcess
from lab.measures.shapes import LeaseFaultMeasures
from lab.declarations.pacing import Pacing
from lab.servers.clients import pg_engine
from lab.servers.services import Services
from lab.servers.stores import SQL_STORES, idle_transaction_guard
from lab.workload.contract import NO_WRITE
from lab.workload.job import run_job
from lab.workload.table import COMPANY_SIZE, ensure_schema
from scenarios.base import Scenario, Skip, TrialEnv, judged

F_ = TypeVar("F_", bound=Fault)
COMPANY = 1
HEAL_GRACE_S = 0.3  # after the TTL, before the contender tries: clocks and timers are not exact


def lease_params(parallel: int, default_parallel: int | None = None) -> dict[str, dict]:
    """The profiles a lease-fault scenario runs: a TTL of 1 s and one trial quick, of 2 s and three by default,
    `parallel` trials at once (default_parallel by default, where that differs)."""
    return {"quick": {"ttl_s": 1.0, "trials": 1, "parallel": parallel},
            "default": {"ttl_s": 2.0, "trials": 3, "parallel": parallel if default_parallel is None else default_parallel}}


def lease_fault_trial(env: TrialEnv, which: str | type[Fault] | Fault, step: int | None = None) -> LeaseFaultMeasures:
    """One trial of this shape with the fault named (lab/faults), given as a class (declared by its scenario) or
    as an instance (of a chosen strength). step: one of several trials a search runs under one trial spec,
    each with a table and a lock key of its own."""
    cls = backends.load(env.spec.backend)
    fault = faults.load(which)
    missing = fault.missing()
    if missing is not None:
        raise Skip(DoesNotRun(missing))
    reason = fault.cannot_run(cls, env.services)
    if reason is not None:
        raise Skip(reason)
    ttl = env.params["ttl_s"]
    table = env.table() if step is None else env.table(f"rows{step}")
    table.seed(env.writes, COMPANY, COMPANY_SIZE)
    spec = holder_spec(env, cls, table, ttl, step)
    contender = None
    pool = ThreadPoolExecutor(1)
    holder, target = None, None
    history = Recorder()
    try:
        fault.prepare(env.services, cls)
        route = fault.route(env.services, cls)
        if route.holder_services is not None:  # the holder runs where the servers have other addresses (a namespace)
            spec.update(route.holder_services.to_addresses())
        if route.lock_services is not None:
            spec["lock_addresses"] = route.lock_services.to_addresses()
            if route.own_servers:
                prepare_own_storage(route.lock_services, cls)
        if route.writes_url is not None:
            spec["writes_dsn"] = route.writes_url.render_as_string(hide_password=False)
        if route.holder_environment is not None:
            spec["report_clock"] = True  # a holder on a fake clock reports it, for its history
        # The contender's lock goes where the holder's does when that is the trial's own server; never through
        # a proxy the fault cuts.
        contender = env.backend(table=table, options={"ttl_s": ttl}, key=spec["key"],
                                routed=route.lock_services if route.own_servers else None)
        holder = HolderProcess(spec, netns=route.netns, env=route.holder_environment)
        acquired = holder.wait_for("acquire", 30)
        if not acquired["granted"]:
            raise LabError("the holder could not take a fresh lock")
        effective_ttl = float(acquired.get("ttl") or ttl)
        at_point = holder.wait_for("at_point", 30)
        target = Target(env.services, env.monitor, cls, holder=holder, lock_pid=acquired.get("lock_pid"),
                        write_pid=at_point.get("write_pid"), ttl=effective_ttl)
        t_fault = time.monotonic()
        with env.waiting():  # a restart, an election: the fault's own time
            fault.inject(target)
            evidence = fault.confirm(target)  # FaultNotConfirmed makes this trial an error, never a verdict
        ask_at, patience = _contender_window(fault, effective_ttl, t_fault, acquired["t"])
        env.pause(max(0.0, ask_at - time.monotonic()))
        # The contender keeps trying for its patience; the fault heals once it is in or has given up
        # (a lock inside a live transaction keeps it waiting, and then it goes in only after the heal).
        other = pool.submit(run_job, contender, [COMPANY], COMPANY_SIZE, "contender", patience=patience,
                            history=history, retry_errors=True)  # a stopped server times its requests out
        with env.waiting():  # in at once, or after the patience the fault declares, or while it still asks
            wait([other], timeout=_heal_after(fault, effective_ttl, patience))
        t_heal = time.monotonic()
        evidence.update(fault.heal(target))
        holder.go()
        events = holder.finish(timeout=30 + 3 * effective_ttl)
        job = other.result(timeout=30 + 3 * effective_ttl)
    finally:
        if target is not None:
            fault.heal(target)  # idempotent: a failed trial must not leave a holder stopped or cut
        if holder is not None:
            holder.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        if contender is not None:
            contender.close()
        fault.close()
    measures = holder_measures(events, job, table, env, fault.name, spec["fault_point"], t_fault, t_heal, effective_ttl,
                               history, fault.readings())
    measures["evidence"] = evidence
    measures["contender"]["token"] = contender.token
    return measures


def holder_spec(env: TrialEnv, cls, table, ttl: float, step: int | None) -> dict:
    """What the holder process is told: its backend, lock key and options, the post's guard of one TTL on its
    SQL sessions, the servers' addresses, its table and company, and the point where it stops for the fault."""
    return {"backend": cls.name, "backend_entry": backends.entry(cls.name),
            "key": env.key() if step is None else env.key(f"lock{step}"),
            "options": env.options({"ttl_s": ttl}),
            # a lock on another service than SQL (Redis, etcd) has no session to guard: it gets PostgreSQL's, unused
            "lock_settings": idle_transaction_guard(cls.lock_service if cls.lock_service in SQL_STORES else "postgres",
                                                    ttl),
            "write_settings": idle_transaction_guard(cls.writes_to, ttl), **env.services.to_addresses(),
            "table": table.name, "company": COMPANY, "rows": COMPANY_SIZE, "run_id": "holder",
            "fault_point": "before_write" if cls.holds_across_writes() else "after_delete"}


def _contender_window(fault: Fault, ttl: float, t_fault: float, t_grant: float) -> tuple[float, float]:
    """When the contender starts asking (monotonic) and for how long: one TTL and a grace after the fault struck
    (the lease has lapsed by then; a restart itself takes part of that time) for one more TTL, unless the fault
    says otherwise (a clock fault asks at once, while the holder's lease runs on every clock but the one moved)."""
    if fault.ask_after_ttls is None:
        ask_at = t_fault + ttl + HEAL_GRACE_S
    else:
        ask_at = max(time.monotonic(), t_fault) + fault.ask_after_ttls * ttl
    patience = ttl + 1.0 if fault.patience_ttls is None else fault.patience_ttls * ttl
    if fault.ask_by_ttls is not None:
        patience = max(0.0, min(patience, t_grant + fault.ask_by_ttls * ttl - ask_at))
    return ask_at, patience


def _heal_after(fault: Fault, ttl: float, patience: float) -> float:
    """How long after the contender began asking the fault heals: once the contender is in or has given up (its
    patience and a grace), or, for a fault that declares it, that many TTLs in, while the contender still asks."""
    if fault.heals_after_asking_ttls is None:
        return patience + 0.5
    return min(patience, fault.heals_after_asking_ttls * ttl)


def prepare_own_storage(services: Services, backend_cls) -> None:
    """On a PostgreSQL the fault started for the trial (a lease row's, on a fake clock): the lab's schema and
    what the backend keeps there, as the run made them on its own server."""
    if backend_cls.lock_service != "postgres":
        return
    engine = pg_engine(services.pg(), isolation_level="AUTOCOMMIT", pool_size=1)
    try:
        ensure_schema(engine)
        backends.prepare_storage(engine, [backend_cls.name])
    finally:
        engine.dispose()


def first_applicable(kinds: tuple[type[F_], ...], backend_cls) -> type[F_]:
    """The first of several faults that applies to a backend by its declarations (a Redis's clock or one Redlock
    master's), else the first, whose reason then says why none does."""
    return next((kind for kind in kinds if kind().applies_to(backend_cls) is None), kinds[0])


def _effective_outcome(write: dict) -> str:
    """A write's outcome, with an indeterminate commit replaced by what reading the table resolved."""
    outcome = write.get("outcome", NO_WRITE)
    if outcome == "indeterminate":
        resolved: dict[str | None, str] = {"committed": "committed", "not committed": "failed"}
        return resolved.get(write.get("resolved"), "indeterminate")
    return outcome


def right_scope(backend_cls) -> str | None:
    """Where a backend's right lives, as the history says it: "run" (held across writes), "company" (a lock
    inside the write), or None (no lock at all: none, an idempotent upsert, SERIALIZABLE)."""
    if backend_cls.holds_across_writes():
        return "run"
    return "company" if Capability.IN_TRANSACTION in backend_cls.capabilities else None


def holder_ops(events: list[dict], t0: float, company: int, scope: str | None) -> list[Op]:
    """The holder process's reported events as history operations on the trial's clock (t0: its zero).

    A run-level right is its grant; a right inside the write is its company lock, taken before the holder
    stopped at its fault point after its delete; a strategy without a lock has no right at all. The holder
    reports when it asks COMMIT (its write's `before_commit` point) and its write once it has ended; a holder
    that never reached that point is bounded by the report of its write. Every signal it heard (told.py) is
    a `told` operation; its keep-alive's first failed renewal is a failed `renew` as well, where the margin
    search reads what the lease did (lab/checkers/lease.py).
    """
    run_level = scope == "run"
    rec = Recorder(t0)
    first: dict = {}  # event name -> its first event
    for event in events:
        first.setdefault(event["event"], event)
    acquire, at_point, write = first.get("acquire"), first.get("at_point"), first.get("write")
    if acquire is not None:  # asked from its first report on, or from its gate's opening (a shared event's holder)
        rec.add("holder", Type.INVOKE, F.ACQUIRE, at=first.get("asking", events[0])["t"])
        if not acquire.get("granted"):
            rec.add("holder", Type.FAIL, F.ACQUIRE, at=acquire["t"])
        elif run_level:
            rec.add("holder", Type.OK, F.ACQUIRE, at=acquire["t"], scope="run", token=acquire.get("token"))
    if at_point is not None and not run_level:
        rec.add("holder", Type.INVOKE, F.WRITE, at=at_point["t"], company=company)
        if scope == "company":
            rec.add("holder", Type.OK, F.ACQUIRE, at=at_point["t"], scope="company", company=company,
                    token=(acquire or {}).get("token"))
    elif run_level and write is not None:
        begun = first.get("resumed", write)
        rec.add("holder", Type.INVOKE, F.WRITE, at=begun["t"], company=company)
    if write is not None:
        outcome = write.get("outcome")
        if outcome in ("committed", "indeterminate"):
            # When its last COMMIT was asked (a holder that reports none: when its write ended, a later bound).
            asked = [e["t"] for e in events if e["event"] == "commit_asked" and e["t"] <= write["t"]]
            rec.add("holder", Type.INVOKE, F.COMMIT, at=asked[-1] if asked else write["t"], company=company)
        kinds = {"committed": (Type.OK, {}), "rejected": (Type.FAIL, {"fenced": True}),
                 "indeterminate": (Type.INFO, {"resolved": write.get("resolved")})}
        type_, extra = kinds.get(outcome, (Type.FAIL, {}))
        rec.add("holder", type_, F.WRITE, at=write["t"], company=company, error=write.get("error"), **extra)
    for said in signals(events, t0):
        rec.add("holder", Type.OK, F.TOLD, at=t0 + said["at"], how=said["how"], via=said["via"], text=said["text"])
    held = first.get("held")
    if held is not None and held.get("noticed_loss_at") is not None:  # its keep-alive's first failed renewal
        rec.add("holder", Type.FAIL, F.RENEW, at=held["noticed_loss_at"])
    for reading in (e for e in events if e["event"] == "clock"):  # a holder on a fake clock reports it
        rec.add("holder", Type.OK, F.CLOCK, at=reading["t"], clock="holder", offset_s=reading["wall_offset_s"],
                monotonic_offset_s=reading["monotonic_offset_s"])
    release = first.get("release")
    if release is not None:
        rec.add("holder", Type.INVOKE, F.RELEASE, at=release["t"])
        rec.add("holder", Type.OK if release.get("result") == "released" else Type.FAIL, F.RELEASE, at=release["t"])
    return rec.ops()


def lease_history(holder_events: list[dict], contender: Recorder, company: int, scope: str | None,
                  fault: str, t_fault: float, t_heal: float, readings: Sequence[tuple[float, dict]] = ()) -> list[Op]:
    """One history of a lease-fault trial: the holder's operations, the contender's, the fault's strike and heal,
    and what the fault read of a clock (readings: monotonic time and value)."""
    rec = Recorder(contender.t0)
    rec.extend(holder_ops(holder_events, contender.t0, company, scope))
    rec.extend(contender.ops())
    rec.add("fault", Type.OK, F.FAULT, at=t_fault, name=fault)
    rec.add("fault", Type.OK, F.HEAL, at=t_heal, name=fault)
    for at, value in readings:
        rec.add("fault", Type.OK, F.CLOCK, at=at, **value)
    return rec.ops()


def holder_measures(events, job, table, env, fault, point, t_fault, t_heal, ttl,
                    contender_history: Recorder, readings: Sequence[tuple[float, dict]] = (),
                    company: int = COMPANY) -> LeaseFaultMeasures:
    """What the holder and the contender did and what the company ended as, times from the holder's grant
    (from its first event when no grant ever came back to it: a holder without a grant cannot lose one),
    with the trial's whole history and final table for the checkers. company: the trial's own (a subject of a
    shared event has one of its own)."""
    by_name = {e["event"]: e for e in events}
    granted = bool(by_name.get("acquire", {}).get("granted"))
    t0 = by_name["acquire"]["t"] if "acquire" in by_name else by_name.get("asking", events[0])["t"]
    write = by_name.get("write", {})
    contender_rebuild = job.rebuilds[0] if job.rebuilds else None
    # The contender got in when its rebuild committed; its job ends right after that commit.
    got_in = job.acquired and (contender_rebuild is not None and contender_rebuild.outcome == "committed")
    contender_in_at = job.ended if got_in else None
    with env.writes.connect() as conn:
        rows_final, runs_in = table.count(conn, company), table.runs_in(conn, company)
    holder_write_at = write.get("t") or by_name.get("exit", {}).get("t")
    noticed = by_name.get("held", {}).get("noticed_loss_at")
    scope = right_scope(backends.load(env.spec.backend))
    return {
        "history": ops.to_json(lease_history(events, contender_history, company, scope, fault, t_fault, t_heal,
                                             readings)),
        "final": {str(company): {"rows": rows_final, "runs": runs_in}},
        "fault": fault, "point": point, "ttl_s": ttl,
        "fault_at": round(t_fault - t0, 3), "healed_at": round(t_heal - t0, 3),
        "holder": {"granted": granted, "token": by_name.get("acquire", {}).get("token"),
                   "write": _effective_outcome(write),
                   "write_resolved": write.get("resolved"),
                   "write_error": write.get("error") or by_name.get("error", {}).get("error"),
                   "write_at": None if holder_write_at is None else round(holder_write_at - t0, 3),
                   "held_after": by_name.get("held", {}).get("held"),
                   "noticed_loss_at": None if noticed is None else round(noticed - t0, 3),
                   "release": by_name.get("release", {}).get("result"),
                   "signals": signals(events, t0)},
        "contender": {"acquired": job.acquired, "write": contender_rebuild.outcome if contender_rebuild else NO_WRITE,
                      "granted_at": None if job.granted_at is None else round(job.granted_at - t0, 3),
                      "in_at": None if contender_in_at is None else round(contender_in_at - t0, 3)},
        # Whether the lock was lost, the company paid, or the fault took the right away at all is the checkers'
        # finding over the history above (lab/checkers/judge.py), not this scenario's.
        "rows": COMPANY_SIZE, "rows_final": rows_final, "runs_in_final": runs_in,
    }


class LeaseFaultScenario(Scenario):
    """A scenario that is this trial shape with one fault; subclasses name the fault and their scales.

    faults maps a variant to the fault it runs, for a scenario with more than one (restart: with
    and without Redis' append-only file); a variant the fault cannot strike is n/a with its reason.
    """

    fault: str | type[Fault]  # the fault it runs (lab/faults): the one of its own name unless it declares another
    faults: dict[str, str | type[Fault]] = {}
    # A lease fault's outcome can vary with timing (a contender in before or after the lapse, a renewal that
    # beat the pause): a cell whose trials disagree runs up to three more (Pacing.extra_trials_when_varied).
    pacing = Pacing(extra_trials_when_varied=3)
    breaks_leases = True  # every one of them is this trial shape: in the told and lease tables

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not hasattr(cls, "fault") and hasattr(cls, "name"):  # a base of several (HolderSideFault) has neither
            cls.fault = cls.name

    def fault_of(self, variant: str) -> str | type[Fault]:
        return self.faults.get(variant, self.fault)

    def fault_for(self, variant: str, backend_cls) -> str | type[Fault]:
        """The fault a variant runs on this backend: fault_of(variant), unless a scenario chooses among several
        by the backend's declarations."""
        return self.fault_of(variant)

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        fault = faults.load(self.fault_for(variant, backend_cls))
        reason = fault.applies_to(backend_cls)
        missing = fault.missing() if reason is None else None
        return DoesNotRun(missing) if missing is not None else reason

    def run_trial(self, env: TrialEnv) -> dict:
        which = self.fault_for(env.spec.variant, backends.load(env.spec.backend))
        return dict(lease_fault_trial(env, which))  # its shape: LeaseFaultMeasures

    def judge(self, measures: dict, backend_cls) -> Verdict:
        """The checkers over the holder's, the contender's and the fault's operations."""
        return judged(measures, backend_cls)


class HolderSideFault(LeaseFaultScenario):
    """A lease fault on the holder's own side (its process stopped, its lock connection cut): the post's core
    experiments, run by default, a dozen at once."""

    driver_axis = True  # the driver decides whether the lock connection sits in a transaction
    default_run = True
    params = lease_params(parallel=12)
