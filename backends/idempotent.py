"""No lock: a rebuild whose rows are a function of the company and its inputs, upserted on a natural key.

The post's Why-not table: an idempotent rebuild "solves a neighbouring problem". Every row is keyed
(company_id, n); a rebuild upserts rows 1..N and deletes any row of the company outside that set, so
two rebuilds of the same inputs, however they overlap, leave the same N rows. The inputs are what a
row carries: option `inputs` names them (two runs given the same inputs write identical rows); without
it each run's own id is its input, as in the post's overlap, where two runs wrote different outputs.
scenarios/whynot/inputs.py measures both.

The natural key needs a unique index on the company table; a rebuild that finds it missing creates it
first (the lab's tables carry one row per (company, n) already), in a short transaction of its own.
"""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy import text

from backends._writes import claimed_transaction
from backends.base import NoRunLock, Point, RebuildResult, no_point
from lab.declarations.capabilities import Capability

NO_MATCHING_KEY = "42P10"  # ON CONFLICT found no unique index on (company_id, n)


class IdempotentUpsert(NoRunLock):
    """Nothing keeps two runs apart; the rows are written so that it should not matter."""

    name = "idempotent"
    summary = ("no lock: rows are a function of the company and its inputs, upserted on the natural key "
               "(company_id, n); rows outside the set deleted")
    capabilities = frozenset({Capability.BATCH_REBUILD, Capability.NATURAL_KEY})
    natural_key: ClassVar[tuple[str, ...]] = ("company_id", "n")

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self._keyed: set[str] = set()  # tables this instance has seen carry the natural key

    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        return self.rebuild_batch([company], rows, run_id, point)

    def rebuild_batch(self, companies: list[int], rows: int, run_id: str, point: Point = no_point,
                      *, use_copy: bool = False) -> RebuildResult:
        inputs = self.ctx.options.get("inputs") or run_id
        for attempt in (1, 2):
            if self.ctx.company_table.name not in self._keyed:
                self._ensure_natural_key()
                self._keyed.add(self.ctx.company_table.name)
            result = claimed_transaction(self.ctx.writes, self.ctx.company_table, sorted(companies), rows, run_id,
                                         point=point, isolation=self.ctx.options.get("isolation", "READ COMMITTED"),
                                         write=lambda conn, c, n, _run, hook: self._upsert(conn, c, n, inputs, hook))
            if result.sqlstate != NO_MATCHING_KEY:
                break
            self._keyed.discard(self.ctx.company_table.name)  # not the table this instance keyed (made again)
        return result

    def _upsert(self, conn, company: int, rows: int, inputs: str, point: Point) -> int:
        """Rows 1..rows of the company as a function of its inputs; returns the old rows removed or replaced."""
        table = self.ctx.company_table.name
        point("before_delete", conn)
        deleted = conn.execute(text(f"delete from {table} where company_id = :c and (n < 1 or n > :rows)"),
                               {"c": company, "rows": rows}).rowcount
        point("after_delete", conn)
        split = self.ctx.company_table.split_insert_at
        ranges = [(1, split), (split + 1, rows)] if split else [(1, rows)]
        for i, (first, last) in enumerate(ranges):
            if i:
                point("mid_insert", conn)
            # Unchanged rows are left alone: a rebuild of the same inputs writes nothing new. An updated row
            # (xmax set) replaced an old one, which counts as deleted, as the delete + insert rebuild counts it.
            replaced = conn.execute(text(
                f"insert into {table} (company_id, run_id, n) select :c, :r, g "
                f"from generate_series(:first, :last) g on conflict (company_id, n) do update "
                f"set run_id = excluded.run_id where {table}.run_id is distinct from excluded.run_id "
                f"returning xmax <> '0'::xid"), {"c": company, "r": inputs, "first": first, "last": last}).scalars()
            deleted += sum(bool(r) for r in replaced)
        point("before_commit", conn)
        return deleted

    def _ensure_natural_key(self) -> None:
        """The unique index (company_id, n) that ON CONFLICT needs, made before the rebuild's transaction.

        Looked up first (a catalog read: no lock, nothing to commit); only when missing is it created, in a
        short transaction of its own under a transaction-level advisory lock (two first rebuilds of a fresh
        table must not build it at once), with synchronous_commit = local: schema setup that waits for no
        standby and holds no table lock through a rebuild."""
        table = self.ctx.company_table.name
        schema, _, bare = table.partition(".")
        index = f"{schema}.{bare[:55]}_nk"
        present = text("select to_regclass(:i)")
        with self.ctx.writes.connect() as conn:
            if conn.execute(present, {"i": index}).scalar() is not None:
                conn.rollback()
                return
            conn.rollback()
            with conn.begin():
                conn.execute(text("set local synchronous_commit = local"))
                conn.execute(text("select pg_advisory_xact_lock(hashtextextended(:k, 0))"),
                             {"k": f"locklab:natural-key:{table}"})
                if conn.execute(present, {"i": index}).scalar() is None:
                    conn.execute(text(f"create unique index {index.partition('.')[2]} on {table} (company_id, n)"))
