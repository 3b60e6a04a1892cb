"""No lock at all: the baseline every other backend is measured against."""

from backends._writes import write_transaction
from backends.base import NoRunLock, Point, RebuildResult, no_point
from lab.declarations.capabilities import Capability
from lab.declarations.post_role import PostRole


class NoLock(NoRunLock):
    """Each rebuild is one transaction and nothing keeps two runs apart."""

    name = "none"
    post_role = PostRole.NO_LOCK
    summary = "no lock: each company rebuilt in one transaction, nothing else"
    capabilities = frozenset({Capability.BATCH_REBUILD})

    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        return self.rebuild_batch([company], rows, run_id, point)

    def rebuild_batch(self, companies: list[int], rows: int, run_id: str, point: Point = no_point,
                      *, use_copy: bool = False) -> RebuildResult:
        """Several companies in one transaction (the cost table's 'one transaction for all')."""
        return write_transaction(self.ctx.writes, self.ctx.company_table, list(companies), rows, run_id, point=point,
                                 isolation=self.ctx.options.get("isolation", "READ COMMITTED"),
                                 use_copy=use_copy)
