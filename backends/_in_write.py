"""The rebuild of a lock that lives in the write transaction, written once: a template the lock fills in.

rebuild() is rebuild_batch() of one company; rebuild_batch() orders the companies (sorted unless
sort_batches is False: the post's rule 4 against deadlocks), retries an attempt that ends on
lock_timeout (rule 3) and hands the result to finished(). A lock writes one attempt, as redis-py's
Lock hands each public method's round trip to one do_* method.
"""

from __future__ import annotations

from backends._writes import retried_on_lock_timeout
from backends.base import NoRunLock, Point, RebuildResult, no_point
from lab.declarations.capabilities import Capability

# What every claim taken inside the write transaction promises: it ends with the writes, one run per company, and
# several companies in one transaction. A backend adds what its own claim is (a parent row, a marker, a job row).
IN_WRITE_CAPABILITIES = frozenset({Capability.IN_TRANSACTION, Capability.EXCLUSION, Capability.BATCH_REBUILD})


class LockInWrite(NoRunLock):
    """Base of the locks taken inside the write transaction: xact, row_lock, unique_backstop."""

    capabilities = IN_WRITE_CAPABILITIES

    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        return self.rebuild_batch([company], rows, run_id, point)

    def rebuild_batch(self, companies: list[int], rows: int, run_id: str, point: Point = no_point,
                      *, use_copy: bool = False) -> RebuildResult:
        """Several companies in one transaction, locked in sorted order unless told otherwise."""
        order = sorted(companies) if self.ctx.options.get("sort_batches", True) else list(companies)
        result = retried_on_lock_timeout(lambda: self.write_attempt(order, rows, run_id, point, use_copy),
                                         self.ctx.options.get("lock_timeout_retries", 0))
        return self.finished(result, order, run_id)

    @property
    def isolation(self) -> str:
        return self.ctx.options.get("isolation", "READ COMMITTED")

    @property
    def lock_timeout_ms(self) -> int | None:
        return self.ctx.options.get("lock_timeout_ms")

    def write_attempt(self, companies: list[int], rows: int, run_id: str, point: Point,
                      use_copy: bool) -> RebuildResult:
        """One write transaction over the companies, each locked the lock's way first."""
        raise NotImplementedError

    def finished(self, result: RebuildResult, companies: list[int], run_id: str) -> RebuildResult:
        """What the lock does once the transaction is over (unique_backstop removes its markers)."""
        return result
