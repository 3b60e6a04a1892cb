"""The two Node.js holders from npm, on real servers: node-redlock over the Redlock masters, and a session advisory
lock on node-postgres' default connection (does it land in the post's case A?).

They need Node.js (Debian's `nodejs`, in .ci/os-packages) and their packages (`npm ci --prefix
backends/node/<name>`, which .ci/run runs): without either each test skips with that one line, and where
.ci/run set LAB_REQUIRE_SYSTEM_SERVERS it fails instead."""

from __future__ import annotations

import os

import pytest

import backends
from backends.external import IDLE
from lab.contract import check_backend
from tests import os_packages
from tests.server.helpers import trial_env, verdict_of

pytestmark = pytest.mark.server

NODE_BACKENDS = ("node_redlock", "node_pg_session")


def require_installed(name: str) -> None:
    """Skip with the line that installs what is missing: Node.js itself, else the program's packages."""
    os_packages.require("nodejs")
    missing = backends.load(name).missing()
    if missing is not None:
        if os.environ.get(os_packages.REQUIRED):
            pytest.fail(f"{missing}, and {os_packages.REQUIRED} is set")
        pytest.skip(missing)


@pytest.fixture(scope="module")
def own_servers():
    """check-backend creates and drops the lab's schema: servers of this module's own."""
    from lab.servers.services import start_services

    with start_services(["postgres", "redlock"]) as running:
        yield running
    IDLE.end_all()


@pytest.mark.parametrize("name", NODE_BACKENDS)
def test_check_backend_keeps_every_promise(own_servers, capsys, name):
    require_installed(name)
    assert check_backend(name, own_servers) == 0
    assert "9 of 9 promises kept" in capsys.readouterr().out


def test_node_postgres_default_connection_is_autocommit_not_case_a(services, engines):
    """Measured: node-postgres sends each query with no transaction around it, so the lock's session is idle,
    not idle in transaction: the post's guard never fires (held, as method 3), idle_session_timeout does."""
    require_installed("node_pg_session")
    from scenarios.cases import Cases

    scenario = Cases()
    params = scenario.profile_params("quick")
    found = {}
    for variant in ("idle_in_transaction", "idle_session"):
        m = scenario.run_trial(trial_env(services, engines, "cases", "node_pg_session", variant, params))
        assert m["holder_state"] == "idle"  # not "idle in transaction": no case A
        found[variant] = verdict_of(scenario, m, "node_pg_session"), m
    assert found["idle_in_transaction"][0] == "held"
    verdict, m = found["idle_session"]
    assert verdict == "lost" and m["server_said"] == "terminating connection due to idle-session timeout"
    assert m["release"].startswith("raised LockLost: release failed: Error:")  # node-postgres' own words


def test_a_paused_node_redlock_holder_writes_after_the_contender_and_hears_it_from_extend(services, engines):
    """SIGSTOP reaches the Node.js program with its holder; on SIGCONT its lease is gone and lock.extend() says so
    (redlock's LockError), but nothing stops the write: node-redlock gives no fencing token."""
    require_installed("node_redlock")
    from scenarios.pause import Pause

    scenario = Pause()
    m = scenario.run_trial(trial_env(services, engines, "pause", "node_redlock", "sigstop",
                                     scenario.profile_params("quick")))
    assert len(m["evidence"]["children_stopped"]) == 1
    assert verdict_of(scenario, m, "node_redlock") == "stale write accepted"
    renewals = [s for s in m["holder"]["signals"] if s["via"] == "renew()"]
    assert renewals and renewals[0]["how"] == "exception" and renewals[0]["text"].startswith("LockError: ")
    released = [s for s in m["holder"]["signals"] if s["via"] == "release()"]
    assert [s["how"] for s in released] == ["exception"] and "Unable to fully release" in released[0]["text"]
