"""Ending a lock's connection without handing it back to a pool: a pooled session would keep its lock for its next
user, so the connection is invalidated (the session ends) before it is closed."""

from __future__ import annotations

from sqlalchemy.engine import Connection, Engine


def drop(conn: Connection, engine: Engine | None = None) -> None:
    """End conn's session and close it; then dispose of engine, the connection's own, even if that failed."""
    try:
        conn.invalidate()
        conn.close()
    finally:
        if engine is not None:
            engine.dispose()
