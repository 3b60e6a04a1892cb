"""The rebuild of a backend whose lock lives apart from its writes: each company in a transaction of its own on the
run's shared write pool (ctx.writes, on the server the writes go to), on sessions other than the lock's."""

from __future__ import annotations

from backends._writes import write_transaction
from backends.base import BackendContext, Point, RebuildResult, no_point


class WritesOnSharedPool:
    """Mixin: rebuild() through the shared pool, as the post's job writes while its lock is held elsewhere."""

    ctx: BackendContext

    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        return write_transaction(self.ctx.writes, self.ctx.company_table, [company], rows, run_id, point=point)
