"""One failover-shaped fault event shared by many subjects, in named phases: acquire, fault, contest, write, heal,
judge.

Each subject is one backend's trial (a TrialEnv of its own: spec, keys, table, company, engines) on the event's
servers. acquire: every subject's holder process is made, then all ask for their locks together and stop at their
fault points. fault: the fault strikes once and is confirmed once. contest: each subject's contender asks, after
one TTL, for its own company. write: each holder is let go and writes. heal: the fault heals and the servers
settle once; every holder and contender ends. judge: each subject's final table is read and its measures built
from its own holder's events, its own contender's history and its own table, and nothing of another subject's,
so the checkers judge it as if it had run alone.

A subject that cannot run (its library refuses, its holder errors) ends alone, with its exception; every other
goes on. A fault that does not confirm, or a step of the event itself that fails, raises: every subject of the
event is then an error, never a verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from sqlalchemy.engine import URL, Engine

import backends
from backends.base import Backend
from lab.declarations.capabilities import Capability
from lab.checkers.ops import F, Recorder, Type
from lab.errors import Interrupted, LabError
from lab.faults import Fault, Target
from lab.holder.process import HolderProcess
from lab.measures.shapes import FailoverMeasures
from lab.servers.postgres.sql import dispose, trial_engines
from lab.servers.services import Services
from lab.workload.contract import describe_error
from lab.workload.job import JobResult, run_job
from lab.workload.table import COMPANY_SIZE, CompanyTable
from scenarios._lease_faults import HEAL_GRACE_S, holder_measures
from scenarios.base import TrialEnv
from scenarios.events import EventOutcome, SubjectOutcome

NEVER_ACKNOWLEDGED = "grant never acknowledged"
GRANT_WITHIN_S = 30.0
WRITE_WITHIN_S = 5.0  # after the holders are let go, their writes' answers are waited for this long before the heal
RETRY_EVERY_S = 0.1  # a contender asking again, as run_job does
# PostgreSQL sessions of one subject at most: its holder's lock, writes and monitor (and a library's own, a
# coordinator's heartbeat), its contender's the same; and the event's own (monitor, writes, probe, replication).
SUBJECT_SESSIONS, EVENT_SESSIONS = 8, 20

# What a scenario may do around the holders, once for the event: before they ask (hold a replica back), once they
# hold (let the replica catch up first); each returns evidence for every subject's trial.
Hook = Callable[[], dict]
# How a subject learns its holder's grant, within seconds: (its acquire event, None), or (None, evidence that the
# grant is waiting on a replica and will never be acknowledged before the fault).
GrantWait = Callable[[HolderProcess, float], tuple[dict | None, dict | None]]


def acquire_event(holder: HolderProcess, within: float) -> tuple[dict | None, dict | None]:
    """The plain case: the holder's acquire answers."""
    return holder.wait_for("acquire", within), None


@dataclass(frozen=True)
class Shape:
    """What a scenario adds to the event (scenarios/_failover_trial.py says what each does).

    monitor: the event's own engine on its servers, for the fault's confirmation (None: the first subject's)."""

    before_holder: Hook | None = None
    once_held: Hook | None = None
    grant: GrantWait = acquire_event
    holder_options: dict | None = None
    ask_after: float | None = None
    patience: float | None = None
    at_fault: Callable[[float], None] | None = None
    settle: Hook | None = None
    guard_s: float | None = None
    retry_errors: bool = False
    before_contender: Hook | None = None
    contender_services: Services | None = None
    monitor: Engine | None = None


@dataclass
class Subject:
    """One backend's part in the event, and everything it alone owns."""

    env: TrialEnv
    company: int  # its own, as its table and its keys are
    cls: type[Backend] = field(init=False)
    table: CompanyTable | None = None
    spec: dict = field(default_factory=dict)  # its holder process's
    holder: HolderProcess | None = None
    waiting: dict | None = None  # evidence that its grant waits on a replica: never acknowledged
    evidence: dict = field(default_factory=dict)  # its own, beside the event's
    made: list[Backend] = field(default_factory=list)  # its contender, once its client could be made
    history: Recorder = field(default_factory=Recorder)  # its contender's operations
    contest: Future | None = None
    events: list[dict] = field(default_factory=list)  # its holder's reports
    job: JobResult | None = None
    failed: BaseException | None = None  # what ended it alone
    measures: dict | None = None

    def __post_init__(self) -> None:
        self.cls = backends.load(self.env.spec.backend)


@dataclass
class Event:
    """The event in progress: its fault, its subjects and what it found once for all of them."""

    fault: Fault
    shape: Shape
    subjects: list[Subject]
    ttl: float
    evidence: dict = field(default_factory=dict)  # every step's, the fault's confirmation included
    confirmed: dict = field(default_factory=dict)  # what the fault's confirm() found: the event's proof it struck
    target: Target | None = None
    t_fault: float = 0.0
    t_heal: float = 0.0

    def alive(self) -> list[Subject]:
        return [s for s in self.subjects if s.failed is None]

    def each(self, step: Callable[[Subject], None], subjects: Sequence[Subject] | None = None) -> None:
        """A step for each subject still running; an exception ends that subject alone (a stop ends the event)."""
        for subject in self.alive() if subjects is None else [s for s in subjects if s.failed is None]:
            try:
                step(subject)
            except Interrupted:
                raise
            except Exception as exc:
                subject.failed = exc
                if subject.holder is not None:
                    subject.holder.kill()


def shared_event(envs: Sequence[TrialEnv], strikes: Fault, shape: Shape = Shape()) -> EventOutcome:
    """Run the event's phases on envs (each a subject on the event's servers), striking the fault `strikes` once,
    and return every subject's outcome.

    The fault heals once the holders have written (or, if a write hangs, WRITE_WITHIN_S after they were let go),
    then settle() waits for the servers to agree again (a demoted primary rewound); the final tables are read
    after that. A failed step of the event (the fault not confirmed) raises after the fault healed."""
    event = Event(strikes, shape, [Subject(env, company) for company, env in enumerate(envs, start=1)],
                  ttl=envs[0].params["ttl_s"])
    pool = ThreadPoolExecutor(max(1, len(envs)), thread_name_prefix="contender")
    try:
        acquire(event)
        if event.alive():
            fault(event)
            contest(event, pool)
            write(event)
            heal(event)
    finally:
        clean_up(event, pool)
    judge(event)
    return EventOutcome([SubjectOutcome(s.env.spec, s.measures, s.failed) for s in event.subjects],
                        evidence=event.confirmed)


def acquire(event: Event) -> None:
    """Every subject's table seeded and holder made; then, at once for all, each holder asks for its lock, and its
    grant and its fault point are waited for, all by one deadline: the holders hold together, and a subject whose
    holder hangs keeps the others at their fault points no longer than GRANT_WITHIN_S."""
    shape = event.shape
    event.each(_prepare_holder)
    event.evidence.update(shape.before_holder() if shape.before_holder is not None else {})
    event.each(lambda s: _start_holder(s, event))
    ready_by = time.monotonic() + GRANT_WITHIN_S
    event.each(lambda s: _ready(s, ready_by))
    event.each(lambda s: s.holder.go() if s.holder is not None else None)  # the gates open together
    held_by = time.monotonic() + GRANT_WITHIN_S
    event.each(lambda s: _granted(s, shape.grant, held_by))
    holding = [s for s in event.alive() if s.waiting is None]  # a grant given back or never acknowledged holds none
    if holding and shape.once_held is not None:
        event.evidence.update(shape.once_held())


def _prepare_holder(subject: Subject) -> None:
    env, cls = subject.env, subject.cls
    subject.table = table = env.table()
    table.seed(env.writes, subject.company, COMPANY_SIZE)
    subject.spec = {"backend": cls.name, "backend_entry": backends.entry(cls.name), "key": env.key(),
                    "table": table.name, "company": subject.company, "rows": COMPANY_SIZE, "run_id": "holder",
                    "fault_point": "before_write" if cls.holds_across_writes() else "after_delete", "gate": True}


def _start_holder(subject: Subject, event: Event) -> None:
    """Its holder process, with the event's guard on its sessions (default one TTL, the post's guard; a fault that
    lasts longer on a server that stays up would otherwise test the guard), stopped at its gate."""
    shape, ttl, env = event.shape, event.ttl, subject.env
    guard_s = ttl if shape.guard_s is None else shape.guard_s
    guard = {"idle_in_transaction_session_timeout": f"{int(guard_s * 1000)}ms"}
    subject.spec.update({"options": env.options({"ttl_s": ttl, **(shape.holder_options or {})}),
                         "lock_settings": guard, "write_settings": guard, **env.services.to_addresses()})
    subject.holder = HolderProcess(subject.spec)


def _ready(subject: Subject, by: float) -> None:
    assert subject.holder is not None  # started in the step before
    subject.holder.wait_for("ready", max(0.0, by - time.monotonic()))


def _granted(subject: Subject, grant: GrantWait, by: float) -> None:
    assert subject.holder is not None  # started before
    granted, subject.waiting = grant(subject.holder, max(0.0, by - time.monotonic()))
    if subject.waiting is not None:
        subject.evidence["grant_waiting"] = subject.waiting
    elif granted is None or not granted["granted"]:  # a GrantWait gives one of the two
        raise LabError("the holder could not take a fresh lock")
    else:
        subject.holder.wait_for("at_point", max(0.0, by - time.monotonic()))


def fault(event: Event) -> None:
    """The fault injected once and confirmed once (FaultNotConfirmed ends every subject as an error); then each
    subject's pools start afresh, as a client made after the failover would."""
    first = event.alive()[0]
    env = first.env
    event.target = Target(env.services, event.shape.monitor or env.monitor, first.cls, holder=first.holder)
    event.t_fault = time.monotonic()
    with env.waiting():  # the promotion: the fault's own time
        event.fault.inject(event.target)
        if event.shape.at_fault is not None:
            event.shape.at_fault(event.t_fault)
        event.confirmed = event.fault.confirm(event.target)
    event.evidence.update(event.confirmed)
    event.each(lambda s: dispose(s.env.writes, s.env.monitor))
    if event.shape.before_contender is not None:
        event.evidence.update(event.shape.before_contender())


def contest(event: Event, pool: ThreadPoolExecutor) -> None:
    """Each subject's contender, on a thread of its own, asks for its own company one TTL and a grace after the fault
    (or shape.ask_after) for its patience; the phase ends when all are in or have given up."""
    shape, ttl = event.shape, event.ttl
    ask_at = event.t_fault + (ttl + HEAL_GRACE_S if shape.ask_after is None else shape.ask_after)
    patience = ttl + 1.0 if shape.patience is None else shape.patience

    def start(subject: Subject) -> None:
        subject.contest = pool.submit(_contend_at, subject, shape, ask_at, patience)

    event.each(start)
    env = event.subjects[0].env
    with env.waiting():  # in at once, or after their patience
        wait([s.contest for s in event.alive() if s.contest is not None],
             timeout=max(0.0, ask_at - time.monotonic()) + patience + 0.5)


def _contend_at(subject: Subject, shape: Shape, ask_at: float, patience: float) -> JobResult:
    """One subject's contender: its client made now (some libraries write as they start: not to a replica), then its
    job at ask_at. A client that cannot be made is made again inside the job when shape.retry_errors says so."""
    env, table = subject.env, subject.table

    def make() -> Backend:
        return env.backend(table=table, options={"ttl_s": env.params["ttl_s"]}, key=subject.spec["key"],
                           routed=shape.contender_services)

    try:
        subject.made.append(make())
    except Exception:  # its library's own error while it starts: tried again in its job, when asked to
        if not shape.retry_errors:
            raise
    env.wait_until(ask_at, 0.0)
    return _contend(make, subject, patience, shape.retry_errors)


def _contend(make: Callable[[], Backend], subject: Subject, patience: float, retry_errors: bool) -> JobResult:
    """The contender's job, its client made first if it could not be yet: each failure to make it is an acquire the
    server did not grant, asked again until the patience runs out, as run_job records a refused one."""
    started = time.monotonic()
    deadline = started + patience
    made, history = subject.made, subject.history
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
                    history.add("contender", Type.INVOKE, F.ACQUIRE)
                    failed = True
                history.add("contender", Type.INFO, F.ACQUIRE, error=describe_error(exc))
                if time.monotonic() + RETRY_EVERY_S > deadline:
                    history.add("contender", Type.FAIL, F.ACQUIRE)
                    return JobResult("contender", acquired=False, started=started, ended=time.monotonic())
                time.sleep(RETRY_EVERY_S)
        if failed:
            history.add("contender", Type.FAIL, F.ACQUIRE)
    return run_job(made[0], [subject.company], COMPANY_SIZE, "contender",
                   patience=max(0.0, deadline - time.monotonic()), history=history, retry_errors=retry_errors)


def write(event: Event) -> None:
    """Every holder whose grant came back is let go; their writes' answers are waited for together, at most
    WRITE_WITHIN_S (a commit may wait on a standby that will not answer until the fault heals)."""
    writers = [s for s in event.alive() if s.waiting is None]
    event.each(lambda s: s.holder.go() if s.holder is not None else None, writers)
    deadline = time.monotonic() + WRITE_WITHIN_S
    for subject in writers:
        if subject.holder is None:
            continue
        try:
            subject.holder.wait_for("write", max(0.0, deadline - time.monotonic()))
        except (TimeoutError, RuntimeError):  # not written yet, or the holder ended without writing
            pass


def heal(event: Event) -> None:
    """The fault healed once, the servers settled once (the scenario's settle), then each holder's end and each
    contender's job waited for."""
    event.t_heal = time.monotonic()
    assert event.target is not None  # struck before
    event.evidence.update(event.fault.heal(event.target))
    if event.shape.settle is not None:
        event.evidence.update(event.shape.settle())
    limit = 30 + 3 * event.ttl

    def ended(subject: Subject) -> None:
        assert subject.holder is not None and subject.contest is not None
        subject.events = subject.holder.finish(timeout=limit)
        subject.job = subject.contest.result(timeout=limit)

    event.each(ended)


def clean_up(event: Event, pool: ThreadPoolExecutor) -> None:
    """Whatever happened: the fault healed (idempotent: no agent left stopped, no link left cut), every holder
    killed, every contender closed, the fault's own set-up released."""
    try:
        if event.target is not None:
            event.fault.heal(event.target)
    finally:
        for subject in event.subjects:
            if subject.holder is not None:
                subject.holder.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        for subject in event.subjects:
            for contender in subject.made:
                contender.close()
        event.fault.close()


def judge(event: Event) -> None:
    """Each subject's measures from its own history only: its holder's events, its contender's operations, the
    event's fault and heal, and its own table read after the servers settled. The checkers then judge each subject
    on these alone (the scenario's judge, applied to each record by lab/runner/events.py)."""
    event.each(lambda s: _measured(s, event))


def _measured(subject: Subject, event: Event) -> None:
    assert subject.job is not None and subject.table is not None
    base = holder_measures(subject.events, subject.job, subject.table, subject.env, event.fault.name,
                           subject.spec["fault_point"], event.t_fault, event.t_heal, event.ttl, subject.history,
                           company=subject.company)
    base["evidence"] = {**event.evidence, **subject.evidence}
    if event.evidence.get("two_primaries") is True:  # the store forked: the checkers judge what survived knowing it
        for op in base["history"]:
            if op["f"] == F.FAULT.value:
                op["value"] = {**(op.get("value") or {}), "forked": True}
    contender_token = subject.made[0].token if subject.made else None
    base["contender"]["token"] = contender_token
    grant = NEVER_ACKNOWLEDGED if subject.waiting is not None else "acknowledged"
    measures: FailoverMeasures = {**base, "grant": grant}
    holder_token = measures["holder"]["token"]
    if (subject.waiting is None and subject.job.acquired and subject.cls.capabilities >= {Capability.FENCING}
            and holder_token is not None and contender_token is not None):
        # A fencing token protects only if the next holder's is higher; a forgotten grant can hand it out again.
        measures["token_reused"] = contender_token <= holder_token
    subject.measures = dict(measures)  # its shape: FailoverMeasures


def sessions_for(subjects: int) -> int:
    """max_connections for the servers of an event of this many subjects."""
    return EVENT_SESSIONS + SUBJECT_SESSIONS * subjects


@contextmanager
def on_servers(envs: Sequence[TrialEnv], services: Services, url: URL) -> Iterator[list[TrialEnv]]:
    """The subjects' environments on the event's servers, each with engines of its own (a subject's pool cannot
    starve another's), disposed at the end."""
    moved: list[TrialEnv] = []
    try:
        for env in envs:
            monitor, writes = trial_engines(url)
            moved.append(replace(env, services=services, monitor=monitor, writes=writes))
        yield moved
    finally:
        for env in moved:
            dispose(env.monitor, env.writes)
