"""The write transaction shared by the PostgreSQL backends: one company, delete + insert."""

from __future__ import annotations

import time

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from backends.base import Point, RebuildResult, describe_error, no_point
from lab.workload import CompanyTable

_XACT_LOCK = text("select pg_advisory_xact_lock(hashtextextended(:k, 0))")


def write_transaction(engine: Engine, table: CompanyTable, company: int, rows: int, run_id: str,
                      point: Point = no_point, xact_lock_key: str | None = None,
                      isolation: str = "READ COMMITTED") -> RebuildResult:
    """Rebuild a company in one transaction; with xact_lock_key, lock it first in its own statement.

    The lock gets its own statement so that, under READ COMMITTED, the delete that
    follows a wait runs on a fresh snapshot (the post's rule 1).
    """
    waited = 0.0
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(isolation_level=isolation)
            with conn.begin():
                point("begin")
                if xact_lock_key is not None:
                    start = time.monotonic()
                    conn.execute(_XACT_LOCK, {"k": xact_lock_key})
                    waited = time.monotonic() - start
                    point("after_lock")
                deleted = table.rebuild(conn, company, rows, run_id, point)
            point("after_commit")
        return RebuildResult("committed", deleted=deleted, waited=waited)
    except SQLAlchemyError as exc:
        return RebuildResult("failed", waited=waited, error=describe_error(exc))
