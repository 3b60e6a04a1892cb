"""What the server says about a transaction holding back VACUUM: a session's xmin and xid age, and what VACUUM
removed and kept. Shared by the experiments that measure the horizon (horizon, giant)."""

from __future__ import annotations

import re

from sqlalchemy import text

from lab.harness.workload import COMPANY_SIZE, CompanyTable
from scenarios.base import TrialEnv

_TUPLES = re.compile(r"tuples: (\d+) removed, (\d+) remain, (\d+) are dead but not yet removable")
_CUTOFF = re.compile(r"removable cutoff: (\d+), which was (\d+) XIDs old")


def vacuum(monitor, table: CompanyTable) -> dict:
    """VACUUM (VERBOSE) the table: what it removed and what it had to keep, in its own words."""
    with monitor.connect() as conn:
        dbapi = conn.connection.dbapi_connection
        del dbapi.notices[:]
        cursor = dbapi.cursor()  # psycopg2 keeps the server's INFO lines on the connection for a plain cursor
        try:
            cursor.execute(f"vacuum (verbose) {table.name}")
        finally:
            cursor.close()
        said = "".join(dbapi.notices)
    tuples, cutoff = _TUPLES.search(said), _CUTOFF.search(said)
    return {"removed": int(tuples.group(1)) if tuples else None,
            "not_removable": int(tuples.group(3)) if tuples else None,
            "cutoff_xids_old": int(cutoff.group(2)) if cutoff else None}


def session_horizon(monitor, pid: int | None) -> dict:
    """The session's state and how many transactions old its xmin and its own xid are (None: it holds none)."""
    if pid is None:
        return {"state": None, "xmin_age": None, "xid_age": None}
    with monitor.connect() as conn:
        row = conn.execute(text("select state, age(backend_xmin), age(backend_xid) from pg_stat_activity "
                                "where pid = :p"), {"p": pid}).first()
    if row is None:
        return {"state": "gone", "xmin_age": None, "xid_age": None}
    return {"state": row[0], "xmin_age": row[1], "xid_age": row[2]}


def fresh_table(env: TrialEnv, label: str, companies: int) -> CompanyTable:
    """A company table of the trial's own, filled and vacuumed, so it starts with nothing dead in it."""
    table = env.table(label)
    table.fill(env.writes, range(1, companies + 1), COMPANY_SIZE)
    vacuum(env.monitor, table)
    return table
