"""The lab's own PgBouncer, a session lock through transaction pooling, and the lab's settings through a pooler."""

import pwd
import secrets
import subprocess
import sys

import pytest
from sqlalchemy import text

from lab.servers.clients import pg_engine
from lab.servers.pooler_settings import SettingsRefused, refusal
from tests.server.helpers import alive, sigkill_and_outlived
from tests.server.pooler_helpers import needs_pgbouncer, start_bouncer

pytestmark = [pytest.mark.server, needs_pgbouncer]

HOLDER_AND_PID = text("select pg_try_advisory_lock(hashtextextended(:k, 0)), pg_backend_pid()")
# What a client's own transaction sees: its server session, and whether that session holds the key.
WHERE_AM_I = text("select pg_backend_pid(), exists(select 1 from pg_locks where pid = pg_backend_pid() and "
                  "locktype = 'advisory' and granted and ((classid::bigint << 32) | objid::bigint) = "
                  "hashtextextended(:k, 0))")
HOLDERS = text("select pid from pg_locks where locktype = 'advisory' and granted and "
               "((classid::bigint << 32) | objid::bigint) = hashtextextended(:k, 0)")


@pytest.fixture(scope="module", params=["session", "transaction"])
def bouncer(request, services):
    """Two server sessions for transaction pooling; session pooling gives each client one, so room for all."""
    running = start_bouncer(services, request.param, pool_size=2 if request.param == "transaction" else 8)
    yield running
    running.stop()


def test_pgbouncer_keeps_the_password_private_and_leaves_nothing(services):
    import psutil

    running = start_bouncer(services, "transaction")
    folder, pid, password = running.folder, running.pids[0], services.pg_url.password
    try:
        assert password not in " ".join(psutil.Process(pid).cmdline())
        files = {p.name: p for p in folder.iterdir()}
        assert set(files) == {"pgbouncer.ini", "users.txt"} and password in files["users.txt"].read_text()
        user = services.embedded["postgres"].user
        for path in [folder, *files.values()]:
            mode = path.stat().st_mode & 0o777
            assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
            if user is not None:
                assert pwd.getpwuid(path.stat().st_uid).pw_name == user == psutil.Process(pid).username()
        assert password not in running.log_path.read_text()
    finally:
        running.stop()
    assert not folder.exists() and not alive(pid)
    running.stop()  # idempotent


def test_a_killed_lab_takes_its_pgbouncer_with_it(services):
    script = ("from lab.servers.services import start_services; from lab.servers.pgbouncer.server import PgBouncer; import time\n"
              "s = start_services(['postgres'])\n"
              "b = PgBouncer(s.tmp, s.pg_url, 'transaction', os_user=s.embedded['postgres'].user).start()\n"
              "print(b.pids[0], s.embedded['postgres'].pids[0], s.tmp, flush=True)\n"
              "time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    bouncer_pid, server_pid, left_behind = child.stdout.readline().split()
    try:
        assert alive(int(bouncer_pid))
        assert sigkill_and_outlived(child, [int(bouncer_pid), int(server_pid)], within=15) == []
    finally:
        subprocess.run(["rm", "-rf", left_behind])  # the next lab's sweep would; this test cleans up itself


def test_a_session_lock_through_transaction_pooling_lands_in_another_clients_transaction(bouncer, engines):
    """The holder's lock stays on a server session; in transaction mode another client's transaction runs on
    it, sees the lock as its own session's, and frees it. In session mode none of that can happen."""
    monitor, _ = engines
    key = f"pooler-test-{secrets.token_hex(4)}"
    holder = pg_engine(bouncer.url, isolation_level="AUTOCOMMIT", pool_size=1)
    other = pg_engine(bouncer.url, pool_size=1)
    try:
        with holder.connect() as mine, other.connect() as theirs:
            got, lock_pid = mine.execute(HOLDER_AND_PID, {"k": key}).one()
            assert got
            with monitor.connect() as conn:
                assert list(conn.execute(HOLDERS, {"k": key}).scalars()) == [lock_pid]
            ran_on = []
            for _ in range(3):
                pid, sees_lock = theirs.execute(WHERE_AM_I, {"k": key}).one()
                theirs.commit()
                ran_on.append((pid, sees_lock))
            freed = theirs.execute(text("select pg_advisory_unlock(hashtextextended(:k, 0)), pg_backend_pid()"),
                                   {"k": key}).one()
            theirs.commit()
            with monitor.connect() as conn:
                holders_after = list(conn.execute(HOLDERS, {"k": key}).scalars())
            own_unlock = mine.execute(text("select pg_advisory_unlock(hashtextextended(:k, 0))"), {"k": key}).scalar()
    finally:
        holder.dispose()
        other.dispose()
    if bouncer.pool_mode == "transaction":
        assert (lock_pid, True) in ran_on  # pg_locks shows the lock on the pid another client's transaction ran on
        assert tuple(freed) == (True, lock_pid) and holders_after == []  # that client freed the holder's lock
        assert own_unlock is False  # and the holder's own release finds nothing to release
    else:
        assert all(pid != lock_pid and not sees for pid, sees in ran_on)
        assert freed[0] is False and holders_after == [lock_pid] and own_unlock is True


@pytest.fixture
def guarded_database(engines):
    """A database whose every new session gets lock_timeout = 1ms, which the lab's sessions pin to 0."""
    monitor, _ = engines
    name = f"locklab_pooled_{secrets.token_hex(3)}"
    with monitor.connect() as conn:
        conn.execute(text(f"create database {name}"))
        conn.execute(text(f"alter database {name} set lock_timeout = '1ms'"))
    yield name
    with monitor.connect() as conn:
        conn.execute(text(f"drop database {name} with (force)"))


def _shown(conn) -> tuple:
    return conn.execute(text("select current_setting('idle_in_transaction_session_timeout'), "
                             "current_setting('lock_timeout'), pg_backend_pid()")).one()


def test_settings_reach_the_server_through_the_pooler(bouncer, guarded_database, services):
    """Two clients with different settings, taking turns: each transaction SHOWs its own client's values and the
    pinned lock_timeout, even where (transaction mode) both clients' transactions share one server session."""
    url = bouncer.url.set(database=guarded_database)
    clients = {value: pg_engine(url, {"idle_in_transaction_session_timeout": value}, pool_size=1)
               for value in ("1234ms", "4321ms")}
    autocommit = pg_engine(url, {"idle_in_transaction_session_timeout": "2222ms"}, isolation_level="AUTOCOMMIT")
    try:
        connections = {value: engine.connect() for value, engine in clients.items()}
        pids = {value: set() for value in clients}
        for _ in range(3):
            for value, conn in connections.items():
                shown, lock_timeout, pid = _shown(conn)
                conn.commit()
                assert (shown, lock_timeout) == (value, "0")
                pids[value].add(pid)
        for conn in connections.values():
            conn.close()
        with autocommit.connect() as conn:
            assert _shown(conn)[:2] == ("2222ms", "0")
        if bouncer.pool_mode == "transaction":  # the two clients really shared a server session
            assert pids["1234ms"] & pids["4321ms"]
        assert all("unsupported startup parameter: options" in refusal(e) for e in [*clients.values(), autocommit])
    finally:
        for engine in [*clients.values(), autocommit]:
            engine.dispose()
    direct = pg_engine(services.pg_url.set(database=guarded_database), {"idle_in_transaction_session_timeout": "1234ms"})
    try:
        with direct.connect() as conn:
            assert _shown(conn)[:2] == ("1234ms", "0") and refusal(direct) is None  # startup options, as before
    finally:
        direct.dispose()


def test_settings_a_server_refuses_through_a_pooler_are_one_error_naming_the_pooler(bouncer):
    engine = pg_engine(bouncer.url, {"locklab_no_such_setting": "1"}, pin=False)
    try:
        with engine.connect() as conn, pytest.raises(SettingsRefused) as refused:
            conn.execute(text("select 1"))
    finally:
        engine.dispose()
    message = str(refused.value)
    assert "unsupported startup parameter: options" in message and "locklab_no_such_setting" in message
    assert "unreachable" not in message and bouncer.url.password not in message


def test_lab_services_accept_a_pooler_as_the_users_postgres(bouncer):
    """`lab run --pg-dsn` through PgBouncer: the reachability check and the capacity read work."""
    from lab.servers.postgres.capacity import read_capacity
    from lab.servers.services import ExternalAddresses, start_services

    dsn = bouncer.url.render_as_string(hide_password=False)
    with start_services(["postgres"], ExternalAddresses(pg_dsn=dsn)) as through:
        assert through.versions["postgres"].startswith("18.") and not through.embedded
        assert read_capacity(through.pg_url).available > 0


def test_a_missing_pgbouncer_makes_every_pooler_cell_does_not_run(monkeypatch, tmp_path):
    """PATH pointed at nothing: every backend x mode is recorded as 'does not run' with the reason, none dropped."""
    from lab.decision.cells import Mark, judge
    from lab.runner import Runner, RunRequest
    from lab.servers.pgbouncer.server import MISSING, find_pgbouncer
    from scenarios.pooler import Pooler

    assert find_pgbouncer("") is None and find_pgbouncer() is not None
    monkeypatch.setattr(Pooler, "search_path", "")
    wanted = ["session", "session_autocommit", "xact", "lease_row"]
    folder = Runner(RunRequest(wanted, ["pooler"], "quick", tmp_path / "results")).execute()
    trials = folder.trials()
    assert sorted((t["backend"], t["variant"]) for t in trials) == sorted(
        (b, v) for b in wanted for v in ("session_mode", "transaction_mode"))
    assert {(t["status"], t["reason"]) for t in trials} == {("skipped", f"does not run: {MISSING}")}
    assert judge(trials[:1]).mark is Mark.DOES_NOT_RUN
