"""A parent row per company, locked FOR UPDATE as the first statement of the company's write transaction.

The post's Why-not table: "A row lock needs a parent row for every company and blocks foreign-key
inserts." Both halves are measured (scenarios/whynot/row_locks.py). A company with no parent row yet has
nothing to lock, so this backend defines what happens then (option missing_parent):

- "create" (the default): INSERT ... ON CONFLICT DO NOTHING, then the lock, in the same transaction.
  Two first rebuilds at once queue on the parent's unique index (the second's insert waits for the
  first's commit), so even a company's first rebuild is excluded.
- "lock_only": only the SELECT ... FOR UPDATE, as code that assumes the parent exists would run it:
  it locks zero rows and nothing keeps two runs apart.

Parent rows live in the lab's schema, keyed by the run's lock name (the "scope") and the company, so
trials never share one; a child table may reference them by (scope, company_id).
"""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy import text

from backends._in_write import IN_WRITE_CAPABILITIES, LockInWrite
from backends._writes import claimed_transaction
from backends.base import Point, RebuildResult
from lab.declarations.capabilities import Capability
from lab.workload.table import SCHEMA

PARENTS = f"{SCHEMA}.company_parents"
PARENTS_DDL = (f"create table if not exists {PARENTS} (scope text not null, company_id int not null, "
               f"primary key (scope, company_id))")
MISSING_PARENT = ("create", "lock_only")


class RowLock(LockInWrite):
    """The company's parent row is the lock: it lives in the write transaction and ends with it.

    Options: missing_parent ("create" or "lock_only", above), isolation, lock_timeout_ms with
    lock_timeout_retries (a waiter that times out retries the company), sort_batches for rebuild_batch.
    """

    name = "row_lock"
    summary = "a parent row per company locked FOR UPDATE as the first statement of its write transaction"
    capabilities = IN_WRITE_CAPABILITIES | {Capability.PARENT_ROW_LOCK}
    ddl = [PARENTS_DDL]
    # What this backend declares about its lock, for scenarios that test row locks as such.
    parent_table: ClassVar[str] = PARENTS
    row_lock_strength: ClassVar[str] = "UPDATE"

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self.missing_parent = ctx.options.get("missing_parent", "create")
        if self.missing_parent not in MISSING_PARENT:
            raise ValueError(f"missing_parent must be one of {MISSING_PARENT}, not {self.missing_parent!r}")
        self._create = text(f"insert into {PARENTS} (scope, company_id) values (:s, :c) on conflict do nothing")
        self._lock = text(f"select company_id from {PARENTS} where scope = :s and company_id = :c "
                          f"for {self.row_lock_strength}")

    def claim(self, conn, company: int) -> bool:
        """Lock the company's parent row (creating it first unless told not to); the rebuild goes on either way."""
        params = {"s": self.key, "c": company}
        if self.missing_parent == "create":
            conn.execute(self._create, params)
        conn.execute(self._lock, params)  # zero rows when there is no parent: nothing is locked
        return True

    def write_attempt(self, companies: list[int], rows: int, run_id: str, point: Point,
                      use_copy: bool) -> RebuildResult:
        return claimed_transaction(self.ctx.writes, self.ctx.company_table, companies, rows, run_id, point=point,
                                   claim=self.claim, isolation=self.isolation, lock_timeout_ms=self.lock_timeout_ms)
