"""One run of the rebuild job: take the right, rebuild each company, release. The thing under test."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from backends.base import Backend, Point, RebuildResult, no_point
from lab.errors import LockLost


@dataclass
class JobResult:
    """What one run did: whether it got the right, each company's rebuild, and its release."""

    run_id: str
    acquired: bool
    rebuilds: list[RebuildResult] = field(default_factory=list)
    release: str = "not acquired"
    started: float = 0.0  # monotonic seconds
    ended: float = 0.0

    @property
    def outcome(self) -> str:
        """refused / committed / failed: how the run ended for its (first) company."""
        if not self.acquired:
            return "refused"
        return self.rebuilds[0].outcome if self.rebuilds else "nothing to do"

    def summary(self, t0: float) -> dict:
        first = self.rebuilds[0] if self.rebuilds else RebuildResult("refused" if not self.acquired else "none")
        return {"run": self.run_id, "outcome": self.outcome, "waited": round(first.waited, 3),
                "deleted": first.deleted, "attempts": sum(r.attempts for r in self.rebuilds),
                "failed_attempts": sum(len(r.failed_attempts) for r in self.rebuilds),
                "error": first.error, "release": self.release,
                "sqlstate": first.sqlstate,
                "started": round(self.started - t0, 3), "ended": round(self.ended - t0, 3)}


def run_job(backend: Backend, companies: list[int], rows: int, run_id: str,
            point: Point = no_point, batch: bool = False, patience: float = 0.0,
            retry_every: float = 0.1) -> JobResult:
    """Run the job as the post's does: try for the lock, leave quietly if refused, else rebuild and release.

    patience > 0 keeps trying for the lock that long (a contender polling, like the post's short
    runs); batch=True rebuilds all companies in one transaction (backends with rebuild_batch).
    """
    job = JobResult(run_id, acquired=False, started=time.monotonic())
    try:
        deadline = job.started + patience
        job.acquired = backend.acquire()
        while not job.acquired and time.monotonic() + retry_every <= deadline:
            time.sleep(retry_every)
            job.acquired = backend.acquire()
        if not job.acquired:
            return job
        if batch:
            job.rebuilds.append(backend.rebuild_batch(companies, rows, run_id, point))
        else:
            for company in companies:
                job.rebuilds.append(backend.rebuild(company, rows, run_id, point))
        try:
            backend.release()
            job.release = "released"
        except LockLost as exc:
            job.release = f"raised LockLost: {exc}"
        return job
    finally:
        job.ended = time.monotonic()
