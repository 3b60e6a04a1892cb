"""What the server says about a transaction holding back VACUUM: a session's xmin and xid age, and what VACUUM
removed and kept. Shared by the experiments that measure the horizon (horizon, giant)."""

from __future__ import annotations

import re
import time

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


OTHERS_PATIENCE_S = 10.0  # how long a measurement waits for another session's horizon (an autoanalyze) to pass


def session_horizon(monitor, pid: int | None) -> dict:
    """The session's state and how many transactions old its xmin and its own xid are (None: it holds none),
    once no other session of the database holds an older horizon; `others_age` is the oldest such horizon still
    held after OTHERS_PATIENCE_S (None: none), which makes what VACUUM keeps not the session's alone."""
    held = _own_horizon(monitor, pid)
    deadline = time.monotonic() + OTHERS_PATIENCE_S
    others = _others_horizon(monitor, pid)
    while others is not None and (held["age"] is None or others >= held["age"]) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the server's own view until the other session's snapshot is gone
        held, others = _own_horizon(monitor, pid), _others_horizon(monitor, pid)
    confounds = others is not None and (held["age"] is None or others >= held["age"])
    return {"state": held["state"], "xmin_age": held["xmin_age"], "xid_age": held["xid_age"],
            "others_age": others if confounds else None}


def _own_horizon(monitor, pid: int | None) -> dict:
    if pid is None:
        return {"state": None, "xmin_age": None, "xid_age": None, "age": None}
    with monitor.connect() as conn:
        row = conn.execute(text("select state, age(backend_xmin), age(backend_xid) from pg_stat_activity "
                                "where pid = :p"), {"p": pid}).first()
    if row is None:
        return {"state": "gone", "xmin_age": None, "xid_age": None, "age": None}
    ages = [age for age in row[1:] if age is not None]
    return {"state": row[0], "xmin_age": row[1], "xid_age": row[2], "age": max(ages) if ages else None}


def _others_horizon(monitor, pid: int | None) -> int | None:
    """The oldest horizon (xmin or xid age) any other session of this database holds: an autovacuum's ANALYZE,
    a session another test or tool left open. Prepared transactions and replication slots count too."""
    with monitor.connect() as conn:
        return conn.execute(text(
            "select max(a) from ("
            " select greatest(age(backend_xmin), age(backend_xid)) a from pg_stat_activity"
            "  where datname = current_database() and pid <> pg_backend_pid() and pid is distinct from :p"
            " union all select age(transaction) from pg_prepared_xacts where database = current_database()"
            " union all select greatest(age(xmin), age(catalog_xmin)) from pg_replication_slots) t"),
            {"p": pid}).scalar()


def fresh_table(env: TrialEnv, label: str, companies: int) -> CompanyTable:
    """A company table of the trial's own, filled and vacuumed, so it starts with nothing dead in it."""
    table = env.table(label)
    with env.monitor.begin() as conn:  # its VACUUM is the experiment's; an autovacuum's ANALYZE would hold a snapshot
        conn.execute(text(f"alter table {table.name} set (autovacuum_enabled = off)"))
    table.fill(env.writes, range(1, companies + 1), COMPANY_SIZE)
    vacuum(env.monitor, table)
    return table
