"""Bare calls for locks made of SQL: the same statements, run by SQLAlchemy on a connection of their own.

A PostgreSQL backend's bare call (Backend.bare_call) is its lock's SQL with nothing of the lab's
around it, so the latency scenario can show what the backend adds. The connection is opened the
way the lab opens the backend's own (same dialect, same session settings in the startup packet);
only the statements and their commits are timed.
"""

from __future__ import annotations

from sqlalchemy import text

from backends.base import BackendContext
from lab.servers.clients import pg_engine

# The lab's drivers that are SQLAlchemy dialects; the other drivers have no bare form declared.
DIALECTS = {"psycopg2": "postgresql+psycopg2", "sqlalchemy+psycopg": "postgresql+psycopg"}

TRY_LOCK = text("select pg_try_advisory_lock(hashtextextended(:k, 0))")
UNLOCK = text("select pg_advisory_unlock(hashtextextended(:k, 0))")


def connection(ctx: BackendContext, driver: str, autocommit: bool):
    """(connection, close) on the lock's address, or None for a driver that is not a SQLAlchemy dialect."""
    if driver not in DIALECTS:
        return None
    engine = pg_engine(ctx.lock_services.pg().set(drivername=DIALECTS[driver]), ctx.lock_settings,
                       pool_size=1, max_overflow=0)
    conn = engine.connect()
    if autocommit:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")

    def close() -> None:
        conn.invalidate()  # never back to a pool: a session lock would stay with it
        conn.close()
        engine.dispose()

    return conn, close


def statement(conn, sql, params: dict, commit: bool):
    """One statement's first column, and a COMMIT after it when the backend's connection needs one."""
    if not commit:
        return lambda: conn.execute(sql, params).scalar()

    def run():
        value = conn.execute(sql, params).scalar()
        conn.commit()
        return value

    return run


def commits(after_acquire: bool, after_release: bool) -> tuple[str, str]:
    """What a bare call's label adds after its acquire and after its release: " + COMMIT" where one is sent."""
    return " + COMMIT" if after_acquire else "", " + COMMIT" if after_release else ""
