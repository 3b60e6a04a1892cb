"""Companies handed out through a PostgreSQL job queue: a job row per company, taken FOR UPDATE SKIP LOCKED.

The job row is taken as the first statement of the company's write transaction and held until its
commit, so the claim and the writes end together; a run that finds a company's job row locked does
not wait, it leaves that company to the run that has it (the rebuild ends as "skipped"). A company
with no job row yet gets one from the write transaction that asks for it (a second run arriving then
waits for that transaction on the job's unique key, and skips the company once it commits); a queue's
producer enqueues jobs ahead, in a short transaction of its own (enqueue()).

rebuild(company) claims that company's job; rebuild_next() claims whichever job is next and not done,
as a queue's workers do. Job rows live in the lab's schema, keyed by the run's lock name (the scope).
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from backends._in_write import IN_WRITE_CAPABILITIES
from backends._writes import CommitWindow, claimed_transaction
from backends.base import NoRunLock, Point, RebuildResult, no_point
from lab.declarations.capabilities import Capability
from lab.workload.table import SCHEMA

JOBS = f"{SCHEMA}.company_jobs"
JOBS_DDL = (f"create table if not exists {JOBS} (scope text not null, company_id int not null, "
            f"enqueued_at timestamptz not null default clock_timestamp(), done_by text, done_at timestamptz, "
            f"rebuilds int not null default 0, primary key (scope, company_id))")


class JobQueue(NoRunLock):
    """SKIP LOCKED hands each company to one run at a time; the others move on instead of waiting.

    Options: isolation; sort_batches for rebuild_batch (a batch skips the companies it cannot claim).
    lock_timeout_ms is accepted and changes nothing: SKIP LOCKED never waits.
    """

    name = "queue"
    summary = ("companies handed out through a PostgreSQL job queue: a per-company job row taken FOR UPDATE "
               "SKIP LOCKED, held inside the write transaction")
    capabilities = IN_WRITE_CAPABILITIES | {Capability.QUEUE}  # its job row is taken inside the write transaction
    ddl = [JOBS_DDL]

    _ENQUEUE = text(f"insert into {JOBS} (scope, company_id) select :s, c from unnest(cast(:cs as int[])) c "
                    f"on conflict do nothing")
    _CREATE = text(f"insert into {JOBS} (scope, company_id) values (:s, :c) on conflict do nothing "
                   f"returning company_id")
    _CLAIM = text(f"select company_id from {JOBS} where scope = :s and company_id = :c for update skip locked")
    _NEXT = text(f"select company_id from {JOBS} where scope = :s and done_at is null order by company_id "
                 f"limit 1 for update skip locked")
    _DONE = text(f"update {JOBS} set done_by = :r, done_at = clock_timestamp(), rebuilds = rebuilds + 1 "
                 f"where scope = :s and company_id = :c")

    def enqueue(self, companies: list[int]) -> None:
        """The producer: one job row per company, in its own short transaction (an existing job is kept)."""
        with self.ctx.writes.begin() as conn:
            conn.execute(self._ENQUEUE, {"s": self.key, "cs": list(companies)})

    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        return self.rebuild_batch([company], rows, run_id, point)

    def rebuild_batch(self, companies: list[int], rows: int, run_id: str, point: Point = no_point,
                      *, use_copy: bool = False) -> RebuildResult:
        opts = self.ctx.options
        order = sorted(companies) if opts.get("sort_batches", True) else list(companies)

        def claim(conn, company: int) -> bool:
            params = {"s": self.key, "c": company}
            if conn.execute(self._CLAIM, params).first() is not None:
                return True
            # No job row to take: another run holds it (the insert finds it and gives up at once), or there is
            # none yet, and then this transaction's insert creates it, held until the commit like a taken one.
            return conn.execute(self._CREATE, params).first() is not None

        return claimed_transaction(self.ctx.writes, self.ctx.company_table, order, rows, run_id, point=point,
                                   claim=claim, write=self._write_and_done,
                                   isolation=opts.get("isolation", "READ COMMITTED"))

    def rebuild_next(self, rows: int, run_id: str, point: Point = no_point) -> tuple[int | None, RebuildResult]:
        """Claim the next job not yet done and rebuild its company, as a queue's worker does: (company, result),
        or (None, skipped) when every job left is done or taken by another run."""
        company, window = None, CommitWindow()
        try:
            with self.ctx.writes.connect() as conn:
                conn = conn.execution_options(isolation_level=self.ctx.options.get("isolation", "READ COMMITTED"))
                with conn.begin() as trans:
                    point("begin", conn)
                    company = conn.execute(self._NEXT, {"s": self.key}).scalar()
                    if company is None:
                        trans.rollback()
                        return None, RebuildResult("skipped", error="skipped: no job left that another run has not")
                    point("after_lock", conn)
                    deleted = self._write_and_done(conn, company, rows, run_id, point)
                    window.commit(trans)
                point("after_commit", None)
            return company, RebuildResult("committed", deleted=deleted)
        except SQLAlchemyError as exc:
            return company, window.failure(exc, self.ctx.writes, self.ctx.company_table,
                                           [] if company is None else [company], run_id, deleted=None)

    def _write_and_done(self, conn, company: int, rows: int, run_id: str, point: Point) -> int:
        deleted = self.ctx.company_table.rebuild(conn, company, rows, run_id, point)
        conn.execute(self._DONE, {"s": self.key, "c": company, "r": run_id})
        return deleted
