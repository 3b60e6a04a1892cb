"""The write transaction shared by the PostgreSQL backends: delete + insert per company."""

from __future__ import annotations

import time
from typing import Callable

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from backends.base import Point, RebuildResult, describe_error, no_point
from lab.workload import CompanyTable

_XACT_LOCK = text("select pg_advisory_xact_lock(hashtextextended(:k, 0))")


def sqlstate(exc: BaseException) -> str | None:
    """The PostgreSQL error code behind a driver error (40001, 40P01, 55P03...), if any."""
    return getattr(getattr(exc, "orig", None), "pgcode", None)


def write_transaction(engine: Engine, table: CompanyTable, companies: list[int], rows: int, run_id: str,
                      *, point: Point = no_point, lock_key: Callable[[int], str] | None = None,
                      isolation: str = "READ COMMITTED", lock_timeout_ms: int | None = None,
                      use_copy: bool = False) -> RebuildResult:
    """Rebuild companies, in the order given, in one transaction.

    With lock_key, each company's pg_advisory_xact_lock is taken first, in its own
    statement, so that under READ COMMITTED the delete that follows a wait runs on a
    fresh snapshot (the post's rule 1).
    """
    waited, deleted = 0.0, 0
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(isolation_level=isolation)
            with conn.begin():
                point("begin", conn)
                if lock_timeout_ms is not None:
                    conn.execute(text(f"set local lock_timeout = {int(lock_timeout_ms)}"))
                for company in companies:
                    if lock_key is not None:
                        start = time.monotonic()
                        conn.execute(_XACT_LOCK, {"k": lock_key(company)})
                        waited += time.monotonic() - start
                        point("after_lock", conn)
                    deleted += table.rebuild(conn, company, rows, run_id, point, use_copy=use_copy)
            point("after_commit", None)
        return RebuildResult("committed", deleted=deleted, waited=waited)
    except SQLAlchemyError as exc:
        return RebuildResult("failed", waited=waited, error=describe_error(exc), sqlstate=sqlstate(exc))
