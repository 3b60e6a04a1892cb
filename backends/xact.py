"""Method 4: pg_advisory_xact_lock as the first statement of each company's write transaction."""

from backends._in_write import LockInWrite
from backends._writes import write_transaction
from backends.base import Point, RebuildResult
from lab.declarations.post_role import PostRole


class TransactionLock(LockInWrite):
    """The lock and the writes share one transaction, so they commit or roll back together.

    Options a scenario may set: isolation (READ COMMITTED by default, the post's rule 1),
    lock_timeout_ms with lock_timeout_retries (rule 3: a waiter that times out retries the
    company rather than skipping it), and sort_batches for rebuild_batch (rule 4).
    """

    name = "xact"
    summary = "pg_advisory_xact_lock inside each company's write transaction: the post's method 4"
    post_role = PostRole.METHOD_4

    def company_key(self, company: int) -> str:
        return f"{self.key}:company:{company}"

    def write_attempt(self, companies: list[int], rows: int, run_id: str, point: Point,
                      use_copy: bool) -> RebuildResult:
        return write_transaction(self.ctx.writes, self.ctx.company_table, companies, rows, run_id, point=point,
                                 lock_key=self.company_key, isolation=self.isolation,
                                 lock_timeout_ms=self.lock_timeout_ms, use_copy=use_copy)
