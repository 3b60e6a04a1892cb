"""A statement of the write path, sent straight to the driver's cursor of a SQLAlchemy connection in a transaction.

Why: through `conn.execute(text(...))` SQLAlchemy spends about 290,000 instructions a statement on this
machine (parsing the text, its cache key, the compiled-cache lookup, an execution context, a result
object), ten times what psycopg2 spends sending it (callgrind; README "Benchmarks"). The
cost table and the throughput figures time thousands of statements, so each company carried about 0.3 ms
of the lab's own that a bare driver does not pay (benchmarks/lab_overhead.py printed lab / bare 1.21).

What reaches the server is unchanged: the SQL is the string SQLAlchemy compiles for a pyformat driver
(`:name` becomes `%(name)s`, as its own regex finds binds), with the same values, interpolated by the same
driver. What the caller sees is unchanged: a driver error goes through SQLAlchemy's own handler, so it is
raised as the same wrapped exception (its sqlstate on `.orig`) and a dropped session still invalidates the
connection. Anything unusual (another paramstyle, no transaction begun, a transaction that must roll back,
an invalidated connection) takes SQLAlchemy's path, whose behaviour there is the reference.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from sqlalchemy import text
from sqlalchemy.engine import Connection

# SQLAlchemy's own pattern for a bind in text() (sql/elements.py TextClause._bind_params_regex): a colon and
# a name, not part of `::` or of a word, and not escaped.
_BIND = re.compile(r"(?<![:\w\x5c]):(\w+)(?![:\w])")


class Statement:
    """One SQL text with :name binds, runnable on a connection by the shortest path that sends the same SQL."""

    def __init__(self, sql: str):
        self.sql = sql
        self.clause = text(sql)  # the reference path, and what a driver of another paramstyle gets
        # A literal % would need doubling for a pyformat driver: such a statement keeps SQLAlchemy's path.
        self.pyformat = None if "%" in sql or "\\:" in sql else _BIND.sub(r"%(\1)s", sql)

    def run(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Execute with params and return the rows the statement affected (rowcount)."""
        cursor = _cursor(conn) if self.pyformat is not None else None
        if cursor is None:
            return conn.execute(self.clause, dict(params)).rowcount
        try:
            cursor.execute(self.pyformat, params)
            count = cursor.rowcount
        except conn.dialect.loaded_dbapi.Error as exc:
            # SQLAlchemy's handler: wraps the error as conn.execute would, closes the cursor and invalidates
            # the connection on a disconnect.
            conn._handle_dbapi_exception(exc, self.pyformat, params, cursor, None)
        cursor.close()
        return count


def _cursor(conn: Connection):
    """A driver cursor when the fast path sends exactly what SQLAlchemy would, else None."""
    if conn.dialect.paramstyle != "pyformat" or conn.invalidated or conn.closed:
        return None
    transaction = conn.get_nested_transaction() or conn.get_transaction()
    if transaction is None or not transaction.is_active:  # SQLAlchemy would autobegin, or refuse
        return None
    dbapi = conn.connection.dbapi_connection
    return None if dbapi is None else dbapi.cursor()
