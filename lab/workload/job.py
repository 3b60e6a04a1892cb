"""One run of the rebuild job: take the right, rebuild each company, release. The thing under test."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from lab.checkers.ops import F, Recorder, Type
from lab.errors import LockLost
from lab.workload.contract import NO_WRITE, Point, RebuildResult, describe_error
from lab.workload.table import no_point


@dataclass
class JobResult:
    """What one run did: whether it got the right, each company's rebuild, and its release."""

    run_id: str
    acquired: bool
    rebuilds: list[RebuildResult] = field(default_factory=list)
    release: str = "not acquired"
    started: float = 0.0  # monotonic seconds
    ended: float = 0.0
    granted_at: float | None = None  # when acquire() said yes

    @property
    def outcome(self) -> str:
        """refused / committed / failed / rejected / indeterminate: how the run ended for its (first) company.

        indeterminate: COMMIT was sent and the connection broke; the rebuild's `resolved` says
        what the table showed afterwards (committed / not committed / unknown).
        """
        if not self.acquired:
            return "refused"
        return self.rebuilds[0].outcome if self.rebuilds else "nothing to do"

    def summary(self, t0: float) -> dict:
        first = self.rebuilds[0] if self.rebuilds else RebuildResult("refused" if not self.acquired else NO_WRITE)
        return {"run": self.run_id, "outcome": self.outcome, "waited": round(first.waited, 3),
                "deleted": first.deleted, "attempts": sum(r.attempts for r in self.rebuilds),
                "failed_attempts": sum(len(r.failed_attempts) for r in self.rebuilds),
                "error": first.error, "release": self.release,
                "sqlstate": first.sqlstate, "resolved": first.resolved,
                "started": round(self.started - t0, 3), "ended": round(self.ended - t0, 3)}


def run_job(backend, companies: list[int], rows: int, run_id: str,
            point: Point = no_point, batch: bool = False, patience: float = 0.0,
            retry_every: float = 0.1, history: Recorder | None = None, retry_errors: bool = False) -> JobResult:
    """Run the job as the post's does: try for the lock, leave quietly if refused, else rebuild and release.

    patience > 0 keeps trying for the lock that long (a contender polling, like the post's short
    runs), and retry_errors keeps trying through the lock server's errors too; batch=True rebuilds all companies in one transaction (backends with rebuild_batch).
    The job itself calls point('after_acquire') and point('before_release'); with a history,
    every step is recorded there as an operation.
    """
    record = _Steps(history, run_id, backend)
    job = JobResult(run_id, acquired=False, started=time.monotonic())
    try:
        deadline = job.started + patience
        record.add(Type.INVOKE, F.ACQUIRE)
        job.acquired = _ask(backend, record, retry_errors)
        while not job.acquired and time.monotonic() + retry_every <= deadline:
            time.sleep(retry_every)
            job.acquired = _ask(backend, record, retry_errors)
        if job.acquired:
            job.granted_at = time.monotonic()
        record.granted(job.acquired)
        if not job.acquired:
            return job
        point("after_acquire", None)
        if batch:
            job.rebuilds.append(backend.rebuild_batch(companies, rows, run_id, point))
        else:
            for company in companies:
                record.company = company
                result = backend.rebuild(company, rows, run_id, record.wrap(point))
                record.outcome(result)
                job.rebuilds.append(result)
        point("before_release", None)
        record.add(Type.INVOKE, F.RELEASE)
        try:
            backend.release()
            job.release = "released"
        except LockLost as exc:
            job.release = f"raised LockLost: {exc}"
        record.add(Type.OK if job.release == "released" else Type.FAIL, F.RELEASE)
        return job
    finally:
        job.ended = time.monotonic()


def _ask(backend, record: _Steps, retry_errors: bool) -> bool:
    """One try for the lock. With retry_errors (a contender polling a lock server a fault may have stopped),
    an error from the server (a timeout) is no grant and the job asks again, as a retrying job would; the
    error stays in the history as an acquire nobody knows the outcome of (info). Otherwise it is let out."""
    if not retry_errors:
        return backend.acquire()
    try:
        return backend.acquire()
    except Exception as exc:  # the client's own error type: redis-py, grpc, a library's wrapper
        record.add(Type.INFO, F.ACQUIRE, error=describe_error(exc))
        return False


# A write's points, as the operations they are: what the job did there (value: company and token, and more).
POINT_OPS = {"begin": (Type.INVOKE, F.WRITE, {}), "after_lock": (Type.OK, F.ACQUIRE, {"scope": "company"}),
             "before_commit": (Type.INVOKE, F.COMMIT, {}), "after_commit": (Type.OK, F.WRITE, {})}


class _Steps:
    """Records a run's steps and results as operations on the trial's history (nothing without a history)."""

    def __init__(self, history: Recorder | None, run_id: str, backend):
        self.history, self.run_id, self.backend = history, run_id, backend
        self.company: int | None = None
        # No run-level right: a lock inside the write, or none at all (acquire() only says "go on").
        self.company_scoped = not backend.holds_across_writes()

    def add(self, type_: Type, f: F, **value) -> None:
        if self.history is not None:
            self.history.add(self.run_id, type_, f, **value)

    def granted(self, acquired: bool) -> None:
        """acquire()'s answer: the right (a run-level one, or only "go on" for a lock inside the write), or not."""
        if acquired:
            self.add(Type.OK, F.ACQUIRE, token=self.backend.token, scope="company" if self.company_scoped else "run")
        else:
            self.add(Type.FAIL, F.ACQUIRE, token=self.backend.token)

    def wrap(self, point: Point) -> Point:
        if self.history is None:
            return point

        def recorded(name, conn):
            if name in POINT_OPS:
                type_, f, extra = POINT_OPS[name]
                self.add(type_, f, company=self.company, token=self.backend.token, **extra)
            point(name, conn)

        return recorded

    def outcome(self, result: RebuildResult) -> None:
        """A write that did not commit: rolled back, refused by the fence, or nobody knows (and what a read found)."""
        if result.outcome in ("failed", "rejected"):
            self.add(Type.FAIL, F.WRITE, company=self.company, error=result.error,
                     fenced=True if result.outcome == "rejected" else None)
        elif result.outcome == "indeterminate":
            self.add(Type.INFO, F.WRITE, company=self.company, error=result.error, resolved=result.resolved)
