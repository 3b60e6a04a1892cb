"""lab doctor against a real PostgreSQL with planted traps; it reads only, under a role that can only read."""

import json
import subprocess
import sys
import time

import pytest
from sqlalchemy import text

from lab.doctor.postgres import run_doctor
from lab.servers.clients import pg_engine

pytestmark = pytest.mark.server

PASSWORD = "doctor-s3cret"


@pytest.fixture(scope="module")
def planted(services, engines):
    """Two databases (one with traps set, one clean) and a login role that may only read."""
    monitor, _ = engines
    with monitor.connect() as conn:
        for statement in ("drop database if exists doctor_traps", "drop database if exists doctor_clean",
                          "drop role if exists doctor_ro", "create database doctor_traps",
                          "create database doctor_clean",
                          f"create role doctor_ro login password '{PASSWORD}'",
                          "grant pg_read_all_stats, pg_read_all_settings to doctor_ro",
                          "alter database doctor_traps set idle_in_transaction_session_timeout = '10min'",
                          "alter role doctor_ro in database doctor_traps set idle_session_timeout = '5min'"):
            conn.execute(text(statement))
    url = services.pg_url
    yield {name: url.set(database=name, username="doctor_ro", password=PASSWORD).render_as_string(hide_password=False)
           for name in ("doctor_traps", "doctor_clean")}, url
    with monitor.connect() as conn:
        for statement in ("drop database doctor_traps with (force)", "drop database doctor_clean with (force)",
                          "drop role doctor_ro"):
            conn.execute(text(statement))


def by_name(checks):
    return {c.name: c for c in checks}


def test_a_clean_database_passes(planted):
    dsns, _ = planted
    _, checks = run_doctor(dsns["doctor_clean"])
    found = by_name(checks)
    assert found["idle guards"].status == "pass" and found["advisory lock holders"].status == "pass"
    assert not [c for c in checks if c.status == "fail"]


def test_database_and_role_guards_are_reported_with_their_source(planted):
    dsns, _ = planted
    _, checks = run_doctor(dsns["doctor_traps"])
    guards = by_name(checks)["idle guards"]
    assert guards.status == "warn"
    assert "idle_in_transaction_session_timeout = 600000ms (source: database)" in guards.evidence
    # ALTER ROLE ... IN DATABASE: PostgreSQL names that source "database user"
    assert "idle_session_timeout = 300000ms (source: database user)" in guards.evidence
    assert any("role doctor_ro: idle_session_timeout=5min" in e for e in guards.evidence)


def test_a_holder_idle_in_transaction_fails_and_an_autocommit_one_does_not(planted):
    dsns, url = planted
    engine = pg_engine(url.set(database="doctor_clean"))
    try:
        autocommit = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        autocommit.execute(text("select pg_advisory_lock(1)"))
        _, checks = run_doctor(dsns["doctor_clean"])
        holders = by_name(checks)["advisory lock holders"]
        assert holders.status == "pass" and "idle," in holders.evidence[0]
        default = engine.connect()  # autobegin: the post's method 1
        default.execute(text("select pg_advisory_lock(2)"))
        _, checks = run_doctor(dsns["doctor_clean"])
        holders = by_name(checks)["advisory lock holders"]
        assert holders.status == "fail" and "idle in transaction" in holders.summary
        _, checks = run_doctor(dsns["doctor_clean"], hung_after_s=0)
        assert "hung run" in by_name(checks)["advisory lock holders"].summary
    finally:
        for conn in (default, autocommit):
            conn.invalidate()
        engine.dispose()


def test_it_writes_nothing_and_prints_no_password(planted):
    dsns, _ = planted
    result = subprocess.run([sys.executable, "-m", "lab.cli", "doctor", "--dsn", dsns["doctor_traps"], "--json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert PASSWORD not in result.stdout + result.stderr
    assert {c["name"] for c in report["checks"]} == {"idle guards", "advisory lock holders", "TCP keepalives",
                                                     "connection pooler", "waiter timeouts"}
    statements = [sql for c in report["checks"] for sql in c["sql"]]
    assert statements and all(s.lstrip().lower().startswith(("select", "show")) for s in statements)


def test_the_session_is_read_only(planted):
    """The doctor's own engine settings: a write through them is refused by the server."""
    dsns, _ = planted
    from lab.servers.clients import parse_pg_dsn

    engine = pg_engine(parse_pg_dsn(dsns["doctor_clean"]), {"default_transaction_read_only": "on"})
    try:
        with engine.connect() as conn, pytest.raises(Exception, match="read-only transaction"):
            conn.execute(text("create table doctor_should_not_exist (x int)"))
    finally:
        engine.dispose()


def test_an_unreachable_server_is_one_line_exit_2_quickly():
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "lab.cli", "doctor", "--dsn",
                             f"postgresql://u:{PASSWORD}@127.0.0.1:1/x"], capture_output=True, text=True, timeout=30)
    assert time.monotonic() - start < 10 and result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and PASSWORD not in result.stderr
