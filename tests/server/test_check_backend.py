"""`lab check-backend` on a plugin whose own code raises: a broken promise naming the step, never a traceback.

Issue 33: a first plugin made its library's release() raise in the second run's release, and the
command printed 37 lines of traceback from lab/contract.py instead of the promise it broke.
"""

import subprocess
import sys

import pytest

import backends
from lab.contract import check_backend
from tests.server import planted_backends

pytestmark = pytest.mark.server

# The planted step -> what the BROKEN line names.
NAMED = {
    "cannot_run": "cannot_run()",
    "init": "RaisesAt_init(ctx, key)",
    "acquire": "acquire()",
    "rebuild": "rebuild()",
    "held": "held()",
    "release": "release() after a loss raises LockLost",
    "second_release": "the second run's release() (after the first lost its lock)",
    "bare_call": "bare_call()",
    "close": "close()",
}


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL of this module's own: check-backend creates and drops the lab's schema, which the
    session's servers keep for every other test."""
    from lab.servers.services import start_services

    with start_services(["postgres"]) as running:
        yield running


def plant(monkeypatch, step: str) -> str:
    cls = getattr(planted_backends, f"RaisesAt_{step}")
    monkeypatch.setitem(backends.REGISTRY.entries, cls.name, f"{cls.__module__}:{cls.__name__}")
    return cls.name


def test_every_step_was_planted():
    assert set(NAMED) == set(planted_backends.STEPS)


@pytest.mark.parametrize("step", planted_backends.STEPS)
def test_an_exception_at_each_step_is_one_broken_line(postgres, monkeypatch, capsys, step):
    name = plant(monkeypatch, step)
    assert check_backend(name, postgres) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    broken = [line for line in out.splitlines() if line.startswith("BROKEN")]
    assert broken, out
    first = broken[0]
    assert first.startswith(f"BROKEN {NAMED[step]}: ") and f"PluginBug: planted in {step}()" in first, out
    assert "background on this error" not in out  # one line: the message's later lines are left out
    assert out.splitlines()[-1].startswith(f"{name}: ") and "broken" in out.splitlines()[-1], out


def test_the_command_itself_prints_no_traceback_for_issue_33s_release():
    """The CLI end to end, on the planted class named by --backend-module, as a user would run it."""
    result = subprocess.run([sys.executable, "-m", "lab.cli", "check-backend", "planted_raises_second_release",
                             "--backend-module", "tests.server.planted_backends:RaisesAt_second_release"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert ("BROKEN the second run's release() (after the first lost its lock): it raised PluginBug: "
            "planted in second_release()") in result.stdout, result.stdout


def test_the_checks_leave_a_schema_they_did_not_create(services, engines, capsys):
    """The session's schema (as a run's on a server the lab did not start) outlives check-backend: the checks
    remove their own table, never the schema someone else's trials are writing into (CI saw the zookeeper
    tests fail with `schema "locklab" does not exist` after the checks ran on the session's servers)."""
    from sqlalchemy import text

    from lab.workload.table import SCHEMA

    monitor, _ = engines

    def contract_tables() -> int:  # tests/server/test_contract.py may have left its own before: count from here
        with monitor.connect() as conn:
            return conn.execute(text("select count(*) from pg_tables where schemaname = :s and tablename like "
                                     "'rows_%contract_none%'"), {"s": SCHEMA}).scalar()

    before = contract_tables()
    assert check_backend("none", services) == 0, capsys.readouterr().out
    with monitor.connect() as conn:
        assert conn.execute(text("select 1 from pg_namespace where nspname = :s"), {"s": SCHEMA}).scalar() == 1
    assert contract_tables() == before
