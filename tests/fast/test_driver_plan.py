"""Planning the driver axis: a session lock on each driver it has a form on, n/a with the reason elsewhere."""

import backends
from scenarios.cases import Cases
from scenarios.pause import Pause


def test_each_driver_gets_its_own_trials_and_rows():
    classes = [backends.load(n) for n in ("session", "session_commit", "session_autocommit")]
    specs = Cases().plan_drivers(classes, "quick", ["psycopg2", "asyncpg"])
    runnable = {s.label for s in specs if s.skip is None}
    assert {"session", "session@asyncpg", "session_autocommit@asyncpg", "session_commit"} <= runnable
    skipped = {s.label: s.skip for s in specs if s.skip is not None}
    assert "nothing to commit" in skipped["session_commit@asyncpg"]
    assert all(s.id.split("/")[1] == s.label for s in specs)  # a driver's trial never shares an id


def test_a_lock_that_is_not_on_postgresql_has_no_driver_axis():
    specs = Pause().plan_drivers([backends.load("redis"), backends.load("lease_row")], "quick", ["psycopg2", "psycopg"])
    labels = {s.label for s in specs}
    assert "redis" in labels and not any(label.startswith("redis@") for label in labels)
    assert "lease_row@psycopg" in labels  # on PostgreSQL, without a form there: n/a with the reason
    assert next(s for s in specs if s.label == "lease_row@psycopg").skip.startswith("its PostgreSQL connections")
