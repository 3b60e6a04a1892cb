"""MariaDB from Debian's package, started by the lab: on loopback in its temp dir, with a random password nobody
else has, restarted in place, gone with the lab whatever ends it (a SIGKILL included), and a machine without the
package, where the lab says so in one line."""

from __future__ import annotations

import psutil
import pytest
from sqlalchemy import text

from lab.servers.clients import one_row
from lab.servers.mariadb import sql as mariadb_sql
from lab.servers.mariadb.server import MISSING, SEARCH_PATH_VARIABLE
from lab.servers.services import ExternalAddresses, start_services
from tests.server.helpers import assert_next_lab_sweeps, lab_holding, sigkill_and_outlived

pytestmark = pytest.mark.server
needs_mariadb = pytest.mark.os_packages("mariadb-server")


@pytest.fixture(scope="module")
def maria():
    """A MariaDB of this module's own: the tests restart it."""
    with start_services(["mariadb"]) as running:
        yield running


@needs_mariadb
def test_the_embedded_mariadb_is_debians_on_loopback_in_the_labs_temp_dir(maria):
    server = maria.embedded["mariadb"]
    assert maria.versions["mariadb"].startswith("10.11") and maria.mariadb().host == "127.0.0.1"
    [pid] = server.pids
    command = psutil.Process(pid).cmdline()
    assert command[0] == "/usr/sbin/mariadbd" and f"--datadir={maria.tmp}/mariadb/data" in command
    listening = [c.laddr for c in psutil.Process(pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert [(a.ip, a.port) for a in listening] == [("127.0.0.1", maria.mariadb().port)]
    assert server.password not in " ".join(command)  # set over the socket, never on a command line


@needs_mariadb
def test_only_the_random_password_lets_anyone_in(maria):
    import pymysql

    server = maria.embedded["mariadb"]
    for attempt in ({"host": "127.0.0.1", "port": server.port}, {"unix_socket": str(server.socket)}):
        with pytest.raises(pymysql.err.OperationalError) as refused:
            pymysql.connect(user="root", connect_timeout=2, **attempt)
        assert refused.value.args[0] == 1045  # access denied
    engine = mariadb_sql.monitor_engine(maria.mariadb())
    try:
        with engine.connect() as conn:
            roots = conn.execute(text("select host from mysql.user where user = 'root' order by host")).scalars()
            assert list(roots) == ["127.0.0.1", "localhost"]
    finally:
        engine.dispose()


@needs_mariadb
def test_every_lab_session_starts_with_the_idle_guards_pinned_off_unless_given_its_own(maria):
    row = one_row(mariadb_sql.mariadb_engine(maria.mariadb(), {"idle_transaction_timeout": 3}),
                  "select @@idle_transaction_timeout, @@idle_write_transaction_timeout, @@wait_timeout, @@autocommit")
    assert tuple(row) == (3, 0, 28800, 0)  # PyMySQL's default: autocommit off, as the issue says


@needs_mariadb
def test_a_restart_keeps_port_and_rows_and_ends_every_session(maria):
    server = maria.embedded["mariadb"]
    engine = mariadb_sql.monitor_engine(maria.mariadb())
    try:
        with engine.connect() as conn:
            conn.execute(text("create database if not exists restart_test"))
            conn.execute(text("create table if not exists restart_test.t (v int) engine=innodb"))
            conn.execute(text("insert into restart_test.t values (7)"))
        lock = engine.connect()
        assert lock.execute(text("select get_lock('restart-test', 0)")).scalar() == 1
        before, port = server.pids, server.port
        server.restart()
        assert server.pids and not set(before) & set(server.pids) and server.port == port
        assert mariadb_sql.lock_holder(engine, "restart-test") is None  # the lock went with its session
        with engine.connect() as conn:
            assert conn.execute(text("select v from restart_test.t")).scalars().all() == [7]
            conn.execute(text("drop database restart_test"))
        lock.invalidate()
    finally:
        engine.dispose()


@needs_mariadb
def test_mariadbs_made_at_once_keep_their_temporary_tables_apart(tmp_path):
    """A MariaDB removes every '#sql' file in its tmpdir when it starts, so servers that share /tmp remove each
    other's: before each had a tmpdir of its own, 4 of 24 mariadb-install-db run six at a time failed here
    ("Unknown table 'mysql.tmp_user_sys'"). Twelve now install and start in threads of six, and every one does."""
    from concurrent.futures import ThreadPoolExecutor

    from lab.servers.mariadb.server import EmbeddedMariaDB

    servers = [EmbeddedMariaDB(tmp_path, f"m{i}") for i in range(12)]
    try:
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(lambda server: server.start(), servers))
        for server in servers:
            [pid] = server.pids
            assert f"--tmpdir={server.root / 'tmp'}" in psutil.Process(pid).cmdline()
    finally:
        for server in servers:
            server.stop()


@needs_mariadb
def test_a_killed_lab_takes_its_mariadb_with_it_and_the_next_run_removes_its_temp_dir():
    """SIGKILL skips every cleanup handler; the parent-death signal still ends mariadbd."""
    child, [pid], left_behind = lab_holding(["mariadb"])
    assert psutil.Process(pid).name() == "mariadbd"
    assert sigkill_and_outlived(child, [pid], within=15) == []
    assert_next_lab_sweeps(left_behind)


@needs_mariadb
def test_a_mariadb_the_lab_did_not_start_is_reached_by_its_url(maria):
    """--mariadb-url (here the module's own server, as a user's): attached, not started, its version read."""
    url = maria.mariadb().render_as_string(hide_password=False).replace("mariadb+pymysql://", "mysql://")
    with start_services(["mariadb"], ExternalAddresses(mariadb_url=url)) as given:
        assert not given.is_embedded("mariadb") and given.versions["mariadb"] == maria.versions["mariadb"]
        assert "***" in given.describe()["mariadb"]["address"]


def test_without_the_package_the_lab_says_so_in_one_line_and_starts_nothing(monkeypatch):
    monkeypatch.setenv(SEARCH_PATH_VARIABLE, "")
    with start_services(["mariadb"]) as none:
        assert none.unavailable == {"mariadb": MISSING} and not none.embedded
        from lab.errors import ServiceError

        with pytest.raises(ServiceError, match="mariadb-server not installed"):
            none.mariadb()
