"""Method 4: pg_advisory_xact_lock as the first statement of each company's write transaction."""

from backends._writes import retried_on_lock_timeout, write_transaction
from backends.base import NoRunLock, Point, RebuildResult, no_point
from lab.capabilities import Capability


class TransactionLock(NoRunLock):
    """The lock and the writes share one transaction, so they commit or roll back together.

    Options a scenario may set: isolation (READ COMMITTED by default, the post's rule 1),
    lock_timeout_ms with lock_timeout_retries (rule 3: a waiter that times out retries the
    company rather than skipping it), and sort_batches for rebuild_batch (rule 4).
    """

    name = "xact"
    summary = "pg_advisory_xact_lock inside each company's write transaction: the post's method 4"
    capabilities = frozenset({Capability.IN_TRANSACTION, Capability.EXCLUSION, Capability.BATCH_REBUILD})

    def company_key(self, company: int) -> str:
        return f"{self.key}:company:{company}"

    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        return self.rebuild_batch([company], rows, run_id, point)

    def rebuild_batch(self, companies: list[int], rows: int, run_id: str, point: Point = no_point,
                      *, use_copy: bool = False) -> RebuildResult:
        """Several companies in one transaction, their locks taken in sorted order unless told otherwise."""
        opts = self.ctx.options
        order = sorted(companies) if opts.get("sort_batches", True) else list(companies)
        def attempt() -> RebuildResult:
            return write_transaction(self.ctx.writes, self.ctx.table, order, rows, run_id, point=point,
                                     lock_key=self.company_key, isolation=opts.get("isolation", "READ COMMITTED"),
                                     lock_timeout_ms=opts.get("lock_timeout_ms"), use_copy=use_copy)

        return retried_on_lock_timeout(attempt, opts.get("lock_timeout_retries", 0))
