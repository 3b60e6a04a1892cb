"""The write transaction of the strategies that claim a company with a row, not an advisory lock.

The row lock, the unique backstop and the queue each put their claim (a parent row locked, a
"rebuild in progress" row inserted, a job row taken with SKIP LOCKED) before the delete, in the
same transaction, so the claim and the writes commit or roll back together; the idempotent
rebuild claims nothing and replaces delete + insert by an upsert on a natural key. One function
keeps the points, the lock_timeout, the wait and the indeterminate-commit handling of
backends/_writes.py for all of them.

A claim that finds the company taken by another run and does not wait (the queue's SKIP LOCKED)
returns False: that company is left to the run that has it, and a rebuild of it alone ends as
"skipped".
"""

from __future__ import annotations

import time
from typing import Callable

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from backends._writes import CommitWindow
from backends.base import Point, RebuildResult, no_point
from lab.harness.workload import CompanyTable

Claim = Callable[[Connection, int], bool]  # True: the company is this transaction's; False: another run has it
Write = Callable[[Connection, int, int, str, Point], int]  # rebuild one company; returns rows deleted


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
