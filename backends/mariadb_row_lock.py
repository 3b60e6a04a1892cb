"""A company's parent row on MariaDB, locked with SELECT ... FOR UPDATE as the first statement of its write
transaction: the lock inside the write, where MariaDB has one (it has no transaction-scoped GET_LOCK).

The parent row is made first if missing (INSERT IGNORE, in the same transaction): two first rebuilds at once
queue on its primary key (InnoDB's insert waits for the other's commit), so even a company's first rebuild is
excluded. The row lock ends with the transaction, so a session that dies rolls its writes back with its lock.
Parent rows live in the lab's database on MariaDB, keyed by the run's lock name (the "scope") and the company.

Option lock_timeout_ms: how long a waiter waits for the row, as innodb_lock_wait_timeout for these two statements
alone (SET STATEMENT ... FOR); MariaDB counts whole seconds, so it is rounded down (a waiter never waits longer than
asked; under a second, not at all: NOWAIT). The waiter's statement then fails (1205) and its transaction rolls back.
"""

from __future__ import annotations

from sqlalchemy import text

from backends._in_write import IN_WRITE_CAPABILITIES, LockInWrite
from backends._mariadb import OnMariaDB
from backends._writes import claimed_transaction
from backends.base import Point, RebuildResult
from lab.workload.table import SCHEMA

PARENTS = f"{SCHEMA}.company_parents"
PARENTS_DDL = (f"create table if not exists {PARENTS} (scope varchar(255) not null, company_id int not null, "
               f"primary key (scope, company_id)) engine=InnoDB")


class MariaDBRowLock(OnMariaDB, LockInWrite):
    """The company's parent row is the lock: it lives in the write transaction and ends with it (READ COMMITTED, as
    the lab's writes run everywhere; InnoDB's locking read sees the latest committed row either way)."""

    name = "mariadb_row_lock"
    summary = "MariaDB: a parent row per company locked FOR UPDATE as the first statement of its write transaction"
    capabilities = IN_WRITE_CAPABILITIES  # declared again: OnMariaDB, first among its bases, declares none
    ddl = [PARENTS_DDL]

    def _waiting(self, sql: str) -> str:
        """The statement, with the waiter's timeout for it alone when the option sets one."""
        if self.lock_timeout_ms is None:
            return sql
        return f"set statement innodb_lock_wait_timeout = {int(self.lock_timeout_ms) // 1000} for {sql}"

    def claim(self, conn, company: int) -> bool:
        """Lock the company's parent row, creating it first; a second run waits here for the first's commit."""
        params = {"s": self.key[-255:], "c": company}
        conn.execute(text(self._waiting(f"insert ignore into {PARENTS} (scope, company_id) values (:s, :c)")), params)
        conn.execute(text(self._waiting(f"select company_id from {PARENTS} where scope = :s and company_id = :c "
                                        f"for update")), params)
        return True

    def write_attempt(self, companies: list[int], rows: int, run_id: str, point: Point,
                      use_copy: bool) -> RebuildResult:
        return claimed_transaction(self.ctx.writes, self.ctx.company_table, companies, rows, run_id, point=point,
                                   claim=self.claim, isolation=self.isolation)
