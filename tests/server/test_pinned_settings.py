"""A database configured by a cautious DBA (idle guards and a lock_timeout set per database) does not
change what the lab's sessions do: every lab session pins what its scenario relies on."""

import secrets

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from lab.servers.clients import pg_engine, pin_session
from tests.server.helpers import wait_session_gone

pytestmark = pytest.mark.server


@pytest.fixture
def guarded_url(services, engines):
    """A database of its own whose every new session gets a 300 ms idle guard and a 1 ms lock_timeout."""
    monitor, _ = engines
    name = f"locklab_guarded_{secrets.token_hex(3)}"
    with monitor.connect() as conn:
        conn.execute(text(f"create database {name}"))
        for setting, value in (("idle_in_transaction_session_timeout", "300ms"),
                               ("idle_session_timeout", "300ms"), ("lock_timeout", "1ms")):
            conn.execute(text(f"alter database {name} set {setting} = '{value}'"))
    yield services.pg_url.set(database=name)
    with monitor.connect() as conn:
        conn.execute(text(f"drop database {name} with (force)"))


def idle_in_transaction(engine):
    conn = engine.connect()
    conn.execute(text("select 1"))  # autobegin: the session now idles in a transaction
    pid = conn.execute(text("select pg_backend_pid()")).scalar()
    return conn, pid


def test_lab_sessions_pin_the_guards_a_database_sets(engines, guarded_url):
    monitor, _ = engines
    raw, pinned = pg_engine(guarded_url, pin=False), pg_engine(guarded_url)
    try:
        with pinned.connect() as conn:
            shown = {name: conn.execute(text(f"show {name}")).scalar()
                     for name in ("idle_in_transaction_session_timeout", "idle_session_timeout", "lock_timeout")}
        assert shown == {"idle_in_transaction_session_timeout": "0", "idle_session_timeout": "0", "lock_timeout": "0"}
        exposed, exposed_pid = idle_in_transaction(raw)
        kept, kept_pid = idle_in_transaction(pinned)
        wait_session_gone(monitor, exposed_pid)  # the database's guard ends an unpinned session...
        assert kept.execute(text("select pg_backend_pid()")).scalar() == kept_pid  # ...not a lab session
        with pytest.raises(OperationalError):
            exposed.execute(text("select 1"))
        kept.close()
        exposed.invalidate()
    finally:
        raw.dispose()
        pinned.dispose()


def test_a_scenarios_own_setting_still_applies_on_such_a_database(engines, guarded_url):
    monitor, _ = engines
    guarded = pg_engine(guarded_url, {"idle_in_transaction_session_timeout": "200ms"})
    try:
        conn, pid = idle_in_transaction(guarded)
        with guarded.connect() as other:  # the other guards are still pinned
            assert other.execute(text("show lock_timeout")).scalar() == "0"
        wait_session_gone(monitor, pid)
        conn.invalidate()
    finally:
        guarded.dispose()


def test_a_librarys_own_connection_is_pinned_in_one_statement_with_the_scenarios_guard(guarded_url):
    """tooz opens its own psycopg2 connection; pin_session gives it the scenario's guard and turns off the
    database's others, which it names, in one round trip."""
    import psycopg2

    url = guarded_url
    conn = psycopg2.connect(host=url.host, port=url.port, user=url.username, password=url.password,
                            dbname=url.database, connect_timeout=5)
    try:
        with conn.cursor() as cur:
            pinned = pin_session(cur, {"idle_in_transaction_session_timeout": "1500ms"})
            assert sorted(pinned) == ["idle_session_timeout", "lock_timeout"]
            cur.execute("select current_setting('idle_in_transaction_session_timeout'), "
                        "current_setting('idle_session_timeout'), current_setting('lock_timeout')")
            assert cur.fetchone() == ("1500ms", "0", "0")
            assert pin_session(cur) == ["idle_in_transaction_session_timeout"]  # now only the 1500 ms differs
    finally:
        conn.close()


def test_the_run_records_what_the_server_gives_a_session_and_where_it_is_set(guarded_url):
    from lab.servers.postgres.sql import settings_in_force

    found = settings_in_force(guarded_url)
    assert found["server_gives"]["idle_session_timeout"] == "300ms (database)"
    assert any(guarded_url.database in item and "lock_timeout=1ms" in item
               for item in found["set_per_database_or_role"])
