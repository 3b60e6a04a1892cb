"""Which driver defaults land you in the post's case A: the cases scenario's method 1, per driver.

A backend run on another driver than the default is its own row in every table ("session@asyncpg");
this section reads those rows back per driver. It appears only for runs with `--driver`.
"""

from __future__ import annotations

from lab.checkers.outcomes import lock_lost
from lab.measures.kinds import Measured
from lab.declarations.post_role import PostRole
from lab.report.common import md_table, ok_trials
from lab.report.declared import post_roles
from lab.report.sections import RunView, section

DEFAULT = "psycopg2"  # the driver of a backend named without "@": the lab's default (lab/servers/postgres/drivers.py)
GUARDS = [("idle_in_transaction", "idle_in_transaction_session_timeout"), ("idle_session", "idle_session_timeout")]


def driver_of(label: str) -> str:
    return label.partition("@")[2] or DEFAULT


def _guard_cell(records: list[dict]) -> str:
    if not records:
        return "not run"
    lost = sum(lock_lost(r) for r in records)
    states = ", ".join(sorted({r["measures"].get("holder_state") for r in records} - {None}))
    return f"lost {lost}/{len(records)} ({states})" if lost else f"held {len(records)}/{len(records)} ({states})"


def _truthful(records: list[dict]) -> str:
    """held() and release() agree with what the server did: False and LockLost after a loss, True and a
    clean release while held."""
    if not records:
        return "-"
    good = 0
    for r in records:
        m = r["measures"]
        lost = lock_lost(r)
        released = m.get("release") == "released"
        good += (m.get("held_after") is not lost) and (released is not lost)
    return f"{good}/{len(records)}"


def _told(records: list[dict]) -> str:
    """What the code heard first after losing the lock: its next query's error."""
    said = [r["measures"].get("next_query_error") for r in records if lock_lost(r)]
    said = [s for s in said if s]
    if not said:
        return "nothing (not lost)" if records else "-"
    first = said[0] if len(said[0]) <= 90 else said[0][:89].rstrip() + "…"
    return f"`{first}`"


@section(50)
def section_drivers(run: RunView) -> str | None:
    frame = run.frame
    cases = ok_trials(frame, Measured.POST_CASE)
    if not cases.backend.str.contains("@").any():
        return None  # no run of these chose --driver
    roles = post_roles(run.meta)  # a label's driver aside, the backend that declares the post's method 1
    method1 = cases[cases.backend.map(lambda b: roles.get(b.partition("@")[0]) == PostRole.METHOD_1)]
    drivers = list(dict.fromkeys(driver_of(b) for b in method1.sort_values("backend_pos").backend))
    rows = []
    for driver in drivers:
        mine = method1[method1.backend.map(driver_of) == driver]
        by_guard = [mine[mine.variant == variant].to_dict("records") for variant, _ in GUARDS]
        everything = [r for group in by_guard for r in group]
        rows.append([driver, *[_guard_cell(group) for group in by_guard], _truthful(everything), _told(everything)])
    skipped = frame[(frame.measured == Measured.POST_CASE) & (frame.status == "skipped")
                    & (frame.backend.str.contains("@"))]
    notes = sorted({f"`{b}`: {reason}" for b, reason in zip(skipped.backend, skipped.reason)})
    return "\n".join([
        "## Which defaults land you in case A", "",
        "The post's method 1 is a session lock on the driver's default connection. Under psycopg2 that "
        "connection sits *idle in transaction*, so `idle_in_transaction_session_timeout` ends it (case A). "
        "Each row is the same lock on another driver's default connection, under each idle guard (the cases "
        "scenario: a second session probes the lock after the timeout), with the holder's session state as "
        "pg_stat_activity saw it; whether `held()` and `release()` told the truth afterwards; and what the "
        "code heard first (its next query's error). *psycopg* is psycopg 3; *sqlalchemy+X* is SQLAlchemy 2 on "
        "driver X. Reproduce: `lab run --backend session,session_commit,"
        "session_autocommit --driver all --scenario cases`.", "",
        md_table(["driver", "idle in transaction guard", "idle session guard", "held() and release() truthful",
                  "told"], rows), "",
        *([f"Methods with no form on a driver: {'; '.join(notes)}.", ""] if notes else [])])
