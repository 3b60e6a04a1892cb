"""Fencing: PostgreSQL checks the writer's token inside the write transaction.

Each (lock, company) pair keeps the highest token that has written it. A write
whose token is lower than that is refused and rolled back, so a holder whose
lease lapsed cannot overwrite the rebuild of the holder that came after it.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from backends._writes import CommitWindow
from backends.base import Point, RebuildResult, no_point
from lab.workload.table import SCHEMA, CompanyTable

FENCES = f"{SCHEMA}.fences"
FENCES_DDL = (f"create table if not exists {FENCES} (lock_key text not null, company_id int not null, "
              f"token bigint not null, primary key (lock_key, company_id))")

# Move the fence up to our token, or leave it where it is and match no row when it is higher.
_ADVANCE = text(f"insert into {FENCES} (lock_key, company_id, token) values (:k, :c, :t) "
                f"on conflict (lock_key, company_id) do update set token = excluded.token "
                f"where {FENCES}.token <= excluded.token returning token")


class FenceRejected(Exception):
    """The storage refused a write whose token is older than one already written."""


def fenced_write(engine: Engine, table: CompanyTable, company: int, rows: int, run_id: str, *,
                 lock_key: str, token: int | None, point: Point = no_point) -> RebuildResult:
    """Rebuild one company if, and only if, no newer token has written it.

    Outcomes as write_transaction's, plus "rejected" when the fence refuses the token. A token of None
    (a holder that was never granted one) fails: the fence's token column is not null.
    """
    deleted, window = None, CommitWindow()
    try:
        with engine.connect() as conn, conn.begin() as trans:
            point("begin", conn)
            if conn.execute(_ADVANCE, {"k": lock_key, "c": company, "t": token}).first() is None:
                raise FenceRejected(f"token {token} is older than the company's fence")
            point("after_lock", conn)  # the fence row, locked until commit, now holds the company for us
            deleted = table.rebuild(conn, company, rows, run_id, point)
            window.commit(trans)
        point("after_commit", None)
        return RebuildResult("committed", deleted=deleted)
    except FenceRejected as exc:
        return RebuildResult("rejected", error=f"FenceRejected: {exc}")
    except SQLAlchemyError as exc:
        return window.failure(exc, engine, table, [company], run_id, deleted=deleted)
