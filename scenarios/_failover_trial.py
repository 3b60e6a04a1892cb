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
from lab.servers.services import Services
from scenarios._lease_faults import COMPANY, HEAL_GRACE_S, holder_measures
from scenarios.base import TrialEnv, judged

NEVER_ACKNOWLEDGED = "grant never acknowledged"
GRANT_WITHIN_S = 30.0
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
                   retry_errors: bool = False) -> dict:
    """Run the trial on env's servers (the scenario's own); the contender asks contender_services if given.
    holder_options: the holder's own lock options beyond the TTL (the contender gets the TTL alone).
    ask_after: seconds from the fault to the contender's first try (default one TTL and a grace), and
    patience how long it keeps trying (default one more TTL): 0 and 0 ask once, while the lease lives.
    retry_errors: the contender asks again through the server's errors (a primary that refuses writes)."""
    cls = backends.load(env.spec.backend)
    ttl = env.params["ttl_s"]
    options = {"ttl_s": ttl}
    table = env.table()
    table.seed(env.writes, COMPANY, COMPANY_SIZE)
    guard = {"idle_in_transaction_session_timeout": f"{int(ttl * 1000)}ms"}
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
        fault.inject(target)
        evidence.update(fault.confirm(target))  # FaultNotConfirmed makes this trial an error, never a verdict
        # A client made after the failover (some libraries write as soon as they start: not to a replica).
        def make() -> Backend:
            return env.backend(table=table, options=options, key=spec["key"], routed=contender_services)

        if not retry_errors:
            made.append(make())
        env.pause(max(0.0, t_fault + (ttl + HEAL_GRACE_S if ask_after is None else ask_after) - time.monotonic()))
        patience = ttl + 1.0 if patience is None else patience
        other = pool.submit(_contend, make, made, patience, history, retry_errors)
        wait([other], timeout=patience + 0.5)
        t_heal = time.monotonic()
        evidence.update(fault.heal(target))  # a fault that lasts (a pause, a partition) ends here; most have nothing to undo
        if waiting is None:
            holder.go()
        events = holder.finish(timeout=30 + 3 * ttl)
        job = other.result(timeout=30 + 3 * ttl)
    finally:
        if target is not None:
            fault.heal(target)  # idempotent: a failed trial must not leave a server stopped or cut off
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
    """The contender's job, its client made first if it is not yet (into made). A library that writes as it starts
    (tooz's heartbeat) cannot be made while the primary refuses writes: with retry_errors each such failure is an
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


def failover_judgement(measures: dict, backend_cls) -> Verdict:
    """The checkers' verdict; a grant that never came back is quoted, since such a holder never believed it held."""
    return judged(measures, backend_cls, **({"grant": NEVER_ACKNOWLEDGED}
                                            if measures.get("grant") == NEVER_ACKNOWLEDGED else {}))
