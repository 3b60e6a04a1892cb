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


def test_a_lock_with_one_driver_or_not_on_postgresql_has_no_driver_axis():
    specs = Pause().plan_drivers([backends.load("redis"), backends.load("lease_row")], "quick", ["psycopg2", "psycopg"])
    labels = {s.label for s in specs}
    assert labels == {"redis", "lease_row"}  # no empty rows: neither has a form on another driver


def test_only_a_scenario_that_declares_the_driver_axis_runs_it():
    """`lab run --backend all --scenario all --driver all` (the reference): the driver rows where the driver
    changes what the fault does to the lock, the default driver everywhere else."""
    from scenarios.restart import Restart

    classes = [backends.load("session")]
    assert {s.label for s in Restart().plan_drivers(classes, "quick", ["psycopg2", "asyncpg"])} == {"session"}
    assert "session@asyncpg" in {s.label for s in Pause().plan_drivers(classes, "quick", ["psycopg2", "asyncpg"])}
