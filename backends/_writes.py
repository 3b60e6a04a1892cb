"""The write transaction shared by the PostgreSQL backends: delete + insert per company, each company claimed first.

An advisory lock per company (write_transaction's lock_key), a parent row locked, a "rebuild in progress"
row inserted or a job row taken with SKIP LOCKED (claimed_transaction's claim) all come before the
delete, in the same transaction, so the claim and the writes commit or roll back together; the
idempotent rebuild claims nothing and replaces delete + insert by an upsert on a natural key. One
function keeps the points, the lock_timeout, the wait and the indeterminate-commit handling for all.

A claim that finds the company taken by another run and does not wait (the queue's SKIP LOCKED)
returns False: that company is left to the run that has it, and a rebuild of it alone ends as
"skipped".
"""

from __future__ import annotations

import time
from typing import Callable

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError

from backends.base import Point, RebuildResult, describe_error, no_point
from lab.workload.statements import Statement
from lab.workload.table import CompanyTable

_XACT_LOCK = Statement("select pg_advisory_xact_lock(hashtextextended(:k, 0))")


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE behind a driver error (40001, 40P01, 55P03...), if the server sent one: psycopg2's pgcode, or the
    one in MariaDB's error packet (PyMySQL's sqlstate). A MariaDB client-side error (2013 lost connection) has none."""
    orig = getattr(exc, "orig", None)
    return getattr(orig, "pgcode", None) or getattr(orig, "sqlstate", None)


# SQLSTATEs that end the session rather than refuse the statement: 08 (connection exception)
# and 57P01-57P03 (terminated by an administrator, a crash, a shutdown). PostgreSQL can send
# 57P01 after a COMMIT it already made durable locally (a synchronous-replication wait cut
# short), so at COMMIT they leave the outcome open, like a connection that just dropped.
_SESSION_ENDED = ("08", "57P01", "57P02", "57P03")


def commit_unknown(exc: BaseException) -> bool:
    """Whether an error raised by COMMIT leaves its fate open: the connection broke, the server refused nothing.

    A dropped connection surfaces from psycopg2 as OperationalError or InterfaceError with no
    SQLSTATE; an error the server reported for the commit itself (40001 under SERIALIZABLE,
    23xxx from a deferred constraint) is a definite failure.
    """
    if not isinstance(exc, (OperationalError, InterfaceError)):
        return False
    code = sqlstate(exc)
    return code is None or code.startswith(_SESSION_ENDED)


def resolve_commit(engine: Engine, table: CompanyTable, companies: list[int], run_id: str) -> str:
    """After a COMMIT whose answer never came: did it happen? Read the table on a fresh connection.

    "committed" when a company's rows carry run_id (the transaction is all or nothing, so one
    is enough), "not committed" when none does, "unknown" when the read fails as well. A run
    that rebuilt the company after this one would hide the evidence: read at once.
    """
    try:
        with engine.connect() as conn:
            found = any(run_id in table.runs_in(conn, company) for company in companies)
    except SQLAlchemyError:
        return "unknown"
    return "committed" if found else "not committed"


class CommitWindow:
    """Whether COMMIT is in flight: from the moment it goes out the server may commit without our hearing,
    so an error then leaves the outcome unknown (indeterminate, resolved by reading the table) where an
    error before it is a plain rollback. Every write transaction marks its COMMIT through one of these."""

    def __init__(self) -> None:
        self.in_flight = False

    def commit(self, trans) -> None:
        """Send COMMIT on a transaction and hear it back."""
        self.sending()
        trans.commit()
        self.heard()

    def sending(self) -> None:
        """COMMIT goes out now (for a `with conn.begin():` block, whose end sends it)."""
        self.in_flight = True

    def heard(self) -> None:
        self.in_flight = False

    def failure(self, exc: SQLAlchemyError, engine: Engine, table: CompanyTable, companies: list[int],
                run_id: str, *, deleted: int | None, waited: float = 0.0) -> RebuildResult:
        """The result of the write that raised exc: failed, or indeterminate when COMMIT was in flight."""
        return commit_failure(exc, engine, table, companies, run_id, committing=self.in_flight, deleted=deleted,
                              waited=waited)


def commit_failure(exc: SQLAlchemyError, engine: Engine, table: CompanyTable, companies: list[int],
                   run_id: str, *, committing: bool, deleted: int | None, waited: float = 0.0) -> RebuildResult:
    """The result of a write that raised: "failed", or "indeterminate" (resolved) when COMMIT was in flight."""
    if committing and commit_unknown(exc):
        resolved = resolve_commit(engine, table, companies, run_id)
        return RebuildResult("indeterminate", deleted=deleted if resolved == "committed" else None, waited=waited,
                             error=describe_error(exc), sqlstate=sqlstate(exc), resolved=resolved)
    return RebuildResult("failed", waited=waited, error=describe_error(exc), sqlstate=sqlstate(exc))


Claim = Callable[[Connection, int], bool]  # True: the company is this transaction's; False: another run has it
Write = Callable[[Connection, int, int, str, Point], int]  # rebuild one company; returns rows deleted


def write_transaction(engine: Engine, table: CompanyTable, companies: list[int], rows: int, run_id: str,
                      *, point: Point = no_point, lock_key: Callable[[int], str] | None = None,
                      isolation: str = "READ COMMITTED", lock_timeout_ms: int | None = None,
                      use_copy: bool = False) -> RebuildResult:
    """Rebuild companies, in the order given, in one transaction.

    With lock_key, each company's pg_advisory_xact_lock is taken first, in its own
    statement, so that under READ COMMITTED the delete that follows a wait runs on a
    fresh snapshot (the post's rule 1).

    An error before COMMIT is "failed" (rolled back); a broken connection while COMMIT was
    in flight is "indeterminate", resolved by reading the table afterwards (commit_failure).
    """
    def lock(conn: Connection, company: int) -> bool:
        assert lock_key is not None
        _XACT_LOCK.run(conn, {"k": lock_key(company)})
        return True  # it waits for the company: never another run's

    def write(conn: Connection, company: int, n: int, run: str, hook: Point) -> int:
        return table.rebuild(conn, company, n, run, hook, use_copy=use_copy)

    return claimed_transaction(engine, table, companies, rows, run_id, point=point,
                               claim=None if lock_key is None else lock, write=write, isolation=isolation,
                               lock_timeout_ms=lock_timeout_ms)


def claimed_transaction(engine: Engine, table: CompanyTable, companies: list[int], rows: int, run_id: str,
                        *, point: Point = no_point, claim: Claim | None = None, write: Write | None = None,
                        isolation: str = "READ COMMITTED", lock_timeout_ms: int | None = None) -> RebuildResult:
    """Rebuild companies, in the order given, in one transaction, each claimed first (in its own statement).

    Companies another run holds (claim returned False) are left out; when every company was, the
    transaction rolls back and the result is "skipped", with the companies named in its error.
    """
    write = write or (lambda conn, company, n, run, hook: table.rebuild(conn, company, n, run, hook))
    waited, deleted, skipped, window = 0.0, 0, [], CommitWindow()
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(isolation_level=isolation)
            with conn.begin() as trans:
                point("begin", conn)
                if lock_timeout_ms is not None:
                    conn.execute(text(f"set local lock_timeout = {int(lock_timeout_ms)}"))
                for company in companies:
                    if claim is not None:
                        start = time.monotonic()
                        try:
                            ours = claim(conn, company)
                        finally:
                            waited += time.monotonic() - start
                        if not ours:
                            skipped.append(company)
                            continue
                        point("after_lock", conn)
                    deleted += write(conn, company, rows, run_id, point)
                if len(skipped) == len(companies):
                    trans.rollback()
                    return RebuildResult("skipped", waited=waited, error=_skipped(skipped))
                window.commit(trans)
            point("after_commit", None)
        return RebuildResult("committed", deleted=deleted, waited=waited, error=_skipped(skipped) if skipped else None)
    except SQLAlchemyError as exc:
        return window.failure(exc, engine, table, [c for c in companies if c not in skipped], run_id,
                              deleted=deleted, waited=waited)


def _skipped(companies: list[int]) -> str:
    return f"skipped: compan{'y' if len(companies) == 1 else 'ies'} {companies} held by another run"


LOCK_NOT_AVAILABLE = "55P03"  # lock_timeout fired


def retried_on_lock_timeout(attempt: Callable[[], RebuildResult], retries: int) -> RebuildResult:
    """One write transaction, run again up to `retries` times while it ends on lock_timeout (55P03, the
    post's rule 2); the result says how many attempts it took and what the failed ones said."""
    failed = []
    for n in range(1, retries + 2):
        result = attempt()
        if result.sqlstate != LOCK_NOT_AVAILABLE or n == retries + 1:
            break
        failed.append(result.error)
    result.attempts, result.failed_attempts = n, failed
    return result
