"""lab doctor against a real MariaDB with planted guards: it reads them with their origin, as it reads PostgreSQL's,
under a user that can only read, and it never writes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sqlalchemy import text

from lab.doctor.mariadb import run_doctor
from lab.servers.mariadb import sql as mariadb_sql
from lab.servers.services import start_services

pytestmark = [pytest.mark.server, pytest.mark.os_packages("mariadb-server")]
PASSWORD = "doctor-s3cret"


@pytest.fixture(scope="module")
def maria():
    """A MariaDB of this module's own (the tests set its global guards) and a user that may only read."""
    with start_services(["mariadb"]) as running:
        engine = mariadb_sql.monitor_engine(running.mariadb())
        with engine.connect() as conn:
            conn.execute(text(f"create user 'doctor_ro'@'127.0.0.1' identified by '{PASSWORD}'"))
            conn.execute(text("grant select, process on *.* to 'doctor_ro'@'127.0.0.1'"))
        url = running.mariadb().set(username="doctor_ro", password=PASSWORD)
        yield engine, url.render_as_string(hide_password=False).replace("mariadb+pymysql://", "mysql://")
        engine.dispose()


def by_name(checks):
    return {c.name: c for c in checks}


def test_a_server_with_no_idle_guard_passes_and_says_what_wait_timeout_still_does(maria):
    _, dsn = maria
    version, checks = run_doctor(dsn)
    guards = by_name(checks)["idle guards"]
    assert version.startswith("10.11") and guards.status == "pass"
    assert "wait_timeout is 28800 s" in guards.summary
    assert "idle_transaction_timeout = 0 s for this session (global 0, origin COMPILE-TIME)" in guards.evidence
    assert by_name(checks)["GET_LOCK holders"].status == "warn"  # performance_schema is off by default
    assert not [c for c in checks if c.status == "fail"]


def test_global_guards_and_init_connect_are_reported_with_their_origin(maria):
    engine, dsn = maria
    with engine.connect() as conn:
        conn.execute(text("set global idle_transaction_timeout = 600"))
        conn.execute(text("set global wait_timeout = 300"))
        conn.execute(text("set global init_connect = 'set session idle_write_transaction_timeout = 60'"))
    try:
        _, checks = run_doctor(dsn)
    finally:
        with engine.connect() as conn:
            conn.execute(text("set global idle_transaction_timeout = 0"))
            conn.execute(text("set global wait_timeout = 28800"))
            conn.execute(text("set global init_connect = ''"))
    guards = by_name(checks)["idle guards"]
    assert guards.status == "warn"
    assert "idle_transaction_timeout = 600 s for this session (global 600, origin SQL)" in guards.evidence
    # init_connect runs for a user without SUPER, as the doctor's is: the session has it, the global does not
    assert "idle_write_transaction_timeout = 60 s for this session (global 0, origin COMPILE-TIME)" in guards.evidence
    assert any(line.startswith("init_connect sets a guard") for line in guards.evidence)
    assert "idle_transaction_timeout = 600 s ends a GET_LOCK session idle in any transaction" in guards.summary
    assert "wait_timeout = 300 s (below the default 28800 s)" in guards.summary


def test_its_session_is_read_only(maria):
    """The doctor's session setting refuses a write even to a user who may write (root here)."""
    from sqlalchemy.pool import NullPool

    engine, _ = maria
    with engine.connect() as conn:
        conn.execute(text("create database if not exists doctor_probe"))
        conn.execute(text("create table if not exists doctor_probe.t (v int) engine=innodb"))
    doctors = mariadb_sql.mariadb_engine(engine.url, {"tx_read_only": 1}, pin=False, poolclass=NullPool)
    try:
        with doctors.connect() as conn:
            with pytest.raises(Exception, match="READ ONLY transaction"):
                conn.execute(text("insert into doctor_probe.t values (1)"))
    finally:
        doctors.dispose()
        with engine.connect() as conn:
            assert conn.execute(text("select count(*) from doctor_probe.t")).scalar() == 0
            conn.execute(text("drop database doctor_probe"))


def test_the_command_line_takes_a_mysql_dsn_prints_json_and_never_the_password(maria):
    _, dsn = maria
    for flags in (["--dsn", dsn], ["--mariadb-dsn", dsn]):
        done = subprocess.run([sys.executable, "-m", "lab.cli", "doctor", *flags, "--json"], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["server"].startswith("mariadb+pymysql://doctor_ro:***@127.0.0.1:")
        assert {c["name"] for c in report["checks"]} == {"idle guards", "GET_LOCK holders", "waiter timeouts"}
        assert PASSWORD not in done.stdout + done.stderr
