"""One trial shape for a lock service of several servers losing one while a holder holds (a failover,
a restarted Redlock master).

As the lease-fault trial (scenarios/_lease_faults.py): a holder process takes the lock and stops at
its fault point; the fault fails the service over; after one TTL a contender asks; the holder goes
on and writes. Two things differ. The servers are the trial's own (a primary and a standby or
replica, started by the scenario), and the contender may ask another address than the holder
(the promoted replica, when the holder's client does not follow a failover). And a grant may never
come back: a commit that waits for a synchronous standby, or a WAIT that no replica answers, ends
without one; such a holder never believed it held, and the trial says so instead of failing.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable

import backends
from backends.base import Backend
from lab.capabilities import Capability
from lab.errors import LabError
from lab.faults import Fault, Target
from lab.harness.history import History
from lab.harness.holder import HolderProcess
from lab.harness.contract import describe_error
from lab.harness.job import JobResult, run_job
from lab.harness.measures import FailoverMeasures
from lab.harness.verdict import Verdict
from lab.harness.workload import COMPANY_SIZE
from lab.servers.pg import dispose
from lab.servers.services import Services
from scenarios._lease_faults import COMPANY, HEAL_GRACE_S, holder_measures
from scenarios.base import TrialEnv, judged

NEVER_ACKNOWLEDGED = "grant never acknowledged"
GRANT_WITHIN_S = 30.0
WRITE_WITHIN_S = 5.0  # after the holder is let go, its write's answer is waited for this long before the heal
RETRY_EVERY_S = 0.1  # a contender asking again, as run_job does

# What a scenario may do around the holder: before it asks (hold a replica back), once it holds
# (let the replica catch up first); each returns evidence for the trial.
Hook = Callable[[], dict]
# How the trial learns the holder's grant: (its acquire event, None), or (None, evidence that the grant
# is waiting on a replica and will never be acknowledged before the fault).
GrantWait = Callable[[HolderProcess], tuple[dict | None, dict | None]]


def acquire_event(holder: HolderProcess) -> tuple[dict | None, dict | None]:
    """The plain case: the holder's acquire answers."""
    return holder.wait_for("acquire", GRANT_WITHIN_S), None


def failover_trial(env: TrialEnv, fault: Fault, *, contender_services: Services | None = None,
                   before_holder: Hook | None = None, once_held: Hook | None = None,
                   grant: GrantWait = acquire_event, holder_options: dict | None = None,
                   ask_after: float | None = None, patience: float | None = None,
                   at_fault: Callable[[float], None] | None = None, settle: Hook | None = None,
                   guard_s: float | None = None, retry_errors: bool = False,
                   before_contender: Hook | None = None) -> dict:
    """Run the trial on env's servers (the scenario's own); the contender asks contender_services if given.
    holder_options: the holder's own lock options beyond the TTL (the contender gets the TTL alone).
    ask_after: seconds from the fault to the contender's first try (default one TTL and a grace), and
    patience how long it keeps trying (default one more TTL): 0 and 0 ask once, while the lease lives.
    at_fault: called once the fault was injected, with the moment its injection began (a probe starts then).
    guard_s: the holder's idle_in_transaction_session_timeout (default one TTL, the post's guard); a fault that
    lasts longer than that on a server that stays up would otherwise be a test of the guard.
    before_contender: once the fault is confirmed, until the contender's way to the servers leads to the new
    primary (a health-checked route that has not yet marked it up).
    retry_errors: the contender asks again after an error from the servers (a route that has no primary yet), as
    a retrying job would; each error stays in the history as an acquire nobody knows the outcome of. A contender
    whose client cannot even be made (tooz's coordinator writes as it starts, and a primary without a replica
    refuses) is then made again inside its job, each failure such an error.
    The fault heals once the holder has written (or, if its write hangs, WRITE_WITHIN_S after it was let go),
    then settle() waits for the servers to agree again (a demoted primary rewound); the final table is read
    after that."""
    cls = backends.load(env.spec.backend)
    ttl = env.params["ttl_s"]
    options = {"ttl_s": ttl}
    table = env.table()
    table.seed(env.writes, COMPANY, COMPANY_SIZE)
    guard = {"idle_in_transaction_session_timeout": f"{int((ttl if guard_s is None else guard_s) * 1000)}ms"}
    spec = {"backend": cls.name, "backend_entry": backends.entry(cls.name), "key": env.key(),
            "options": env.options({**options, **(holder_options or {})}),
            "lock_settings": guard, "write_settings": guard, **env.services.to_addresses(),
            "table": table.name, "company": COMPANY, "rows": COMPANY_SIZE, "run_id": "holder",
            "fault_point": "before_write" if cls.holds_across_writes() else "after_delete"}
    evidence = before_holder() if before_holder is not None else {}
    pool = ThreadPoolExecutor(1)
    history = History()
    holder = HolderProcess(spec)
    target, made = None, []  # made: the contender, once its client could be made
    try:
        granted, waiting = grant(holder)
        if waiting is not None:
            evidence["grant_waiting"] = waiting
        elif granted is None or not granted["granted"]:  # a GrantWait gives one of the two
            raise LabError("the holder could not take a fresh lock")
        else:
            holder.wait_for("at_point", 30)
            if once_held is not None:
                evidence.update(once_held())
        target = Target(env.services, env.monitor, cls, holder=holder)
        t_fault = time.monotonic()
        with env.waiting():  # the promotion: the fault's own time
            fault.inject(target)
            if at_fault is not None:
                at_fault(t_fault)
            evidence.update(fault.confirm(target))  # FaultNotConfirmed makes this trial an error, never a verdict
        # A client made after the failover (some libraries write as soon as they start: not to a replica), with
        # no pooled connection from before it: the trial's pools start afresh.
        dispose(env.writes, env.monitor)
        if before_contender is not None:
            evidence.update(before_contender())
        def make() -> Backend:
            return env.backend(table=table, options=options, key=spec["key"], routed=contender_services)

        try:
            made.append(make())
        except Exception:  # its library's own error while it starts: tried again in its job, when asked to
            if not retry_errors:
                raise
        env.pause(max(0.0, t_fault + (ttl + HEAL_GRACE_S if ask_after is None else ask_after) - time.monotonic()))
        patience = ttl + 1.0 if patience is None else patience
        other = pool.submit(_contend, make, made, patience, history, retry_errors)
        with env.waiting():  # in at once, or after its patience
            wait([other], timeout=patience + 0.5)
        if waiting is None:
            holder.go()
            _written(holder, WRITE_WITHIN_S)
        t_heal = time.monotonic()
        evidence.update(fault.heal(target))
        if settle is not None:
            evidence.update(settle())
        events = holder.finish(timeout=30 + 3 * ttl)
        job = other.result(timeout=30 + 3 * ttl)
    finally:
        if target is not None:
            fault.heal(target)  # idempotent: a failed trial must not leave an agent stopped or a link cut
        holder.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        for contender in made:
            contender.close()
        fault.close()
    base = holder_measures(events, job, table, env, fault.name, spec["fault_point"], t_fault, t_heal, ttl,
                           history)
    base["evidence"] = evidence
    contender_token = made[0].token if made else None
    base["contender"]["token"] = contender_token
    measures: FailoverMeasures = {**base, "grant": NEVER_ACKNOWLEDGED if waiting is not None else "acknowledged"}
    holder_token = measures["holder"]["token"]
    if (waiting is None and job.acquired and cls.capabilities >= {Capability.FENCING} and holder_token is not None
            and contender_token is not None):
        # A fencing token protects only if the next holder's is higher; a forgotten grant can hand it out again.
        measures["token_reused"] = contender_token <= holder_token
    return dict(measures)  # its shape: FailoverMeasures


def _contend(make: Callable[[], Backend], made: list[Backend], patience: float, history: History,
             retry_errors: bool) -> JobResult:
    """The contender's job, its client made first if it could not be yet (into made): each failure to make it is an
    acquire the server did not grant, asked again until the patience runs out, as run_job records a refused one."""
    started = time.monotonic()
    deadline = started + patience
    if not made:
        failed = False
        while True:
            try:
                made.append(make())
                break
            except Exception as exc:  # the library's own error type while it starts
                if not retry_errors:
                    raise
                if not failed:
                    history.add("contender", "acquire_requested")
                    failed = True
                history.add("contender", "acquire_error", error=describe_error(exc))
                if time.monotonic() + RETRY_EVERY_S > deadline:
                    history.add("contender", "acquire_refused")
                    return JobResult("contender", acquired=False, started=started, ended=time.monotonic())
                time.sleep(RETRY_EVERY_S)
        if failed:
            history.add("contender", "acquire_refused")
    return run_job(made[0], [COMPANY], COMPANY_SIZE, "contender", patience=max(0.0, deadline - time.monotonic()),
                   history=history, retry_errors=retry_errors)


def _written(holder: HolderProcess, within: float) -> None:
    """Until the holder reports its write, or within seconds: a commit may wait on a standby that will not answer
    until the fault heals (the holder then ends with its write's outcome, whatever it is)."""
    try:
        holder.wait_for("write", within)
    except (TimeoutError, RuntimeError):  # not written yet, or the holder ended without writing
        pass


def failover_judgement(measures: dict, backend_cls) -> Verdict:
    """The checkers' verdict; a grant that never came back is quoted, since such a holder never believed it held."""
    return judged(measures, backend_cls, **({"grant": NEVER_ACKNOWLEDGED}
                                            if measures.get("grant") == NEVER_ACKNOWLEDGED else {}))
