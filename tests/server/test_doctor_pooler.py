"""lab doctor through the lab's own PgBouncer: it runs in both pool modes and tells transaction pooling apart."""

import json
import subprocess
import sys

import pytest

from lab.doctor.postgres import run_doctor
from tests.server.pooler_helpers import needs_pgbouncer, start_bouncer

pytestmark = [pytest.mark.server, needs_pgbouncer]


def pooler_check(dsn: str):
    _, checks = run_doctor(dsn)
    return next(c for c in checks if c.name == "connection pooler")


@pytest.mark.parametrize("pool_size", [2, 1])
def test_transaction_pooling_fails_with_the_two_clients_evidence(services, pool_size):
    """pool_size 1: client 1's next transaction waits for client 2's session, which the check sees too."""
    with start_bouncer(services, "transaction", pool_size=pool_size) as bouncer:
        check = pooler_check(bouncer.url.render_as_string(hide_password=False))
    assert check.status == "fail" and "transaction pooling" in check.summary
    first = int(check.evidence[0].rsplit(" ", 1)[1])
    assert check.evidence[1] == f"client 2, a transaction kept open: pid {first}"  # client 1's session, lent
    assert any("unsupported startup parameter: options" in line for line in check.evidence)


def test_session_pooling_is_not_reported_as_transaction_pooling(services):
    with start_bouncer(services, "session", pool_size=4) as bouncer:
        check = pooler_check(bouncer.url.render_as_string(hide_password=False))
    assert check.status == "warn" and "no transaction pooling seen" in check.summary
    pids = [int(line.split(": pid ")[1].split()[0]) for line in check.evidence[1:3]]
    first = int(check.evidence[0].rsplit(" ", 1)[1])
    assert pids[0] != first and pids[1] == first  # each client kept its own server session


def test_a_direct_server_passes(services):
    check = pooler_check(services.pg_url.render_as_string(hide_password=False))
    assert check.status == "pass"
    pids = [int(line.rsplit(" ", 1)[1]) for line in check.evidence[:3]]
    assert pids[0] == pids[2] != pids[1]


def test_lab_doctor_dsn_through_pgbouncer_answers_instead_of_unreachable(services):
    """The issue's new user: `lab doctor --dsn` at PgBouncer 1.18 with its default config."""
    with start_bouncer(services, "transaction") as bouncer:
        dsn = bouncer.url.render_as_string(hide_password=False)
        result = subprocess.run([sys.executable, "-m", "lab.cli", "doctor", "--dsn", dsn, "--json"],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr  # a check failed: transaction pooling
    report = json.loads(result.stdout)
    assert "unreachable" not in result.stdout + result.stderr and bouncer.url.password not in result.stdout
    assert {c["name"]: c["status"] for c in report["checks"]}["connection pooler"] == "fail"
    assert report["server_version"].startswith("18.")
