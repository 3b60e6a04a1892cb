"""What the server says about a transaction holding back VACUUM: a session's xmin and xid age, and what VACUUM
removed and kept. Shared by the experiments that measure the horizon (horizon, giant)."""

from __future__ import annotations

import re
import time

from sqlalchemy import text

from lab.workload.table import COMPANY_SIZE, CompanyTable
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
            "cutoff_xids_old": int(cutoff.group(2)) if cutoff else None,
            "cutoff_xid": int(cutoff.group(1)) if cutoff else None}


OTHERS_PATIENCE_S = 10.0  # how long a measurement waits for another session's older horizon to pass


def session_horizon(monitor, pid: int | None) -> dict:
    """The session's state, how many transactions old its xmin and its own xid are (None: it holds none), and
    the horizon it holds as a raw xid (`horizon_xid`: the older of the two), once no other session of the
    database holds an older one (waited for up to OTHERS_PATIENCE_S: an autovacuum's ANALYZE, a passing query).
    Whether another did hold VACUUM back is read afterwards from VACUUM's own cutoff (others_held)."""
    deadline = time.monotonic() + OTHERS_PATIENCE_S
    row = _horizons(monitor, pid)
    while _older_elsewhere(row) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the server's own view until the other session's snapshot is gone
        row = _horizons(monitor, pid)
    if pid is not None and row is None:
        return {"state": "gone", "xmin_age": None, "xid_age": None, "horizon_xid": None}
    state, xmin_age, xid_age, xmin, xid, _ = row or (None, None, None, None, None, None)
    if xmin is None or xid is None:
        horizon = xid if xmin is None else xmin
    else:
        horizon = xmin if _precedes(xmin, xid) else xid
    return {"state": state, "xmin_age": xmin_age, "xid_age": xid_age, "horizon_xid": horizon}


def _horizons(monitor, pid: int | None):
    """(state, xmin age, xid age, xmin, xid, the oldest age any other session of the database holds) in one
    reading. A backend running VACUUM is left out of the others: its snapshot holds nothing back."""
    with monitor.connect() as conn:
        others = conn.execute(text(
            "select max(greatest(age(backend_xmin), age(backend_xid))) from pg_stat_activity"
            " where datname = current_database() and pid <> pg_backend_pid() and pid is distinct from :p"
            " and pid not in (select pid from pg_stat_progress_vacuum)"), {"p": pid}).scalar()
        if pid is None:
            return (None, None, None, None, None, others)
        row = conn.execute(text(
            "select state, age(backend_xmin), age(backend_xid), backend_xmin::text::bigint, "
            "backend_xid::text::bigint from pg_stat_activity where pid = :p"), {"p": pid}).first()
    return None if row is None else (*row, others)


def _older_elsewhere(row) -> bool:
    if row is None or row[5] is None:
        return False
    own = [age for age in row[1:3] if age is not None]
    return not own or row[5] > max(own)


def _precedes(a: int, b: int) -> bool:
    """xid a is older than xid b (PostgreSQL compares 32-bit xids modulo 2^32)."""
    return 0 < (b - a) % 2**32 < 2**31


def others_held(horizon: dict, vacuumed: dict) -> bool | None:
    """Whether VACUUM was held back by another session than the measured one: its removable cutoff lies before
    the session's horizon, or the session held none and VACUUM still kept dead rows. None: VACUUM did not say."""
    own, cutoff = horizon.get("horizon_xid"), vacuumed.get("cutoff_xid")
    if own is None:
        kept = vacuumed.get("not_removable")
        return None if kept is None else kept > 0
    return None if cutoff is None else _precedes(cutoff, own)


def fresh_table(env: TrialEnv, label: str, companies: int) -> CompanyTable:
    """A company table of the trial's own, filled and vacuumed, so it starts with nothing dead in it."""
    table = env.table(label)
    with env.monitor.begin() as conn:  # its VACUUM is the experiment's; an autovacuum's ANALYZE would hold a snapshot
        conn.execute(text(f"alter table {table.name} set (autovacuum_enabled = off)"))
    table.fill(env.writes, range(1, companies + 1), COMPANY_SIZE)
    vacuum(env.monitor, table)
    return table
