"""Method 4: pg_advisory_xact_lock as the first statement of each company's write transaction."""

from backends._writes import write_transaction
from backends.base import Backend, Point, RebuildResult, no_point


class TransactionLock(Backend):
    """The lock and the writes share one transaction, so they commit or roll back together."""

    name = "xact"
    summary = "pg_advisory_xact_lock inside each company's write transaction: the post's method 4"
    capabilities = frozenset({"in_transaction", "exclusion"})
    isolation = "READ COMMITTED"

    def acquire(self) -> bool:
        # Nothing is held between writes: each rebuild takes its company's lock itself.
        return True

    def held(self) -> bool:
        return False

    def release(self) -> None:
        return None

    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        return write_transaction(self.ctx.writes, self.ctx.table, company, rows, run_id, point,
                                 xact_lock_key=f"{self.key}:company:{company}", isolation=self.isolation)
