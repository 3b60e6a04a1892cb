"""No lock: a per-company "rebuild in progress" row with a unique key, inserted as the write's first statement.

The post's Why-not table calls a unique constraint "a backstop, not exclusion". Here the marker row is
inserted inside the write transaction and removed right after its commit. A second rebuild of the
company that arrives meanwhile inserts the same key: its insert waits on the first's uncommitted index
entry (so it never touches the company's rows while the first is writing), and once the first commits
with its marker still there, it fails with a unique violation (23505). If the first rolls back, its
marker goes with it and the second goes on. scenarios/whynot/backstop.py measures which of these a loser sees.

A run that dies between its commit and the marker's removal leaves the marker behind, and every later
rebuild of that company fails until someone deletes it: the price of a marker that outlives its
transaction, which is what makes the loser fail instead of queueing.
"""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from backends._in_write import IN_WRITE_CAPABILITIES, LockInWrite
from backends._writes import claimed_transaction
from backends.base import Point, RebuildResult, describe_error
from lab.declarations.capabilities import Capability
from lab.workload.table import SCHEMA

MARKERS = f"{SCHEMA}.rebuild_markers"
MARKERS_DDL = (f"create table if not exists {MARKERS} (scope text not null, company_id int not null, "
               f"run_id text not null, started_at timestamptz not null default clock_timestamp(), "
               f"primary key (scope, company_id))")
UNIQUE_VIOLATION = "23505"


class UniqueBackstop(LockInWrite):
    """The marker's unique key is the only thing between two rebuilds of one company."""

    name = "unique_backstop"
    summary = ("no lock: a per-company 'rebuild in progress' row with a unique key, inserted first in the write "
               "transaction and removed after its commit; a second concurrent rebuild fails with 23505")
    # The marker lives in the write transaction (rolled back with it) and a second rebuild cannot pass it.
    capabilities = IN_WRITE_CAPABILITIES | {Capability.UNIQUE_MARKER}
    ddl = [MARKERS_DDL]
    marker_table: ClassVar[str] = MARKERS

    _MARK = text(f"insert into {MARKERS} (scope, company_id, run_id) values (:s, :c, :r)")
    _CLEAR = text(f"delete from {MARKERS} where scope = :s and company_id = any(:cs) and run_id = :r")

    def write_attempt(self, companies: list[int], rows: int, run_id: str, point: Point,
                      use_copy: bool) -> RebuildResult:
        # a lock_timeout is retried (by the template); 23505, the other run's marker, is not
        return claimed_transaction(self.ctx.writes, self.ctx.company_table, companies, rows, run_id, point=point,
                                   claim=lambda conn, c: self._mark(conn, c, run_id), isolation=self.isolation,
                                   lock_timeout_ms=self.lock_timeout_ms)

    def finished(self, result: RebuildResult, companies: list[int], run_id: str) -> RebuildResult:
        if result.outcome == "committed" or (result.outcome == "indeterminate" and result.resolved == "committed"):
            left = self._clear(companies, run_id)
            if left is not None:
                result.error = left
        return result

    def _mark(self, conn, company: int, run_id: str) -> bool:
        conn.execute(self._MARK, {"s": self.key, "c": company, "r": run_id})
        return True

    def _clear(self, companies: list[int], run_id: str) -> str | None:
        """Rebuild finished: remove this run's markers; what went wrong when they stay (see the module's note)."""
        try:
            with self.ctx.writes.begin() as conn:
                conn.execute(self._CLEAR, {"s": self.key, "cs": list(companies), "r": run_id})
            return None
        except SQLAlchemyError as exc:  # the rebuild committed; its marker now blocks the company's next one
            return f"committed, but its marker was left behind: {describe_error(exc)}"
