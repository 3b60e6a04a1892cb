"""The driver axis on the real server: which drivers' default connections land a session lock in case A."""

import pytest

from lab.servers.postgres.drivers import DRIVERS, missing
from scenarios.base import TrialSpec
from scenarios.cases import Cases
from tests.server.helpers import trial_env, verdict_of

pytestmark = pytest.mark.server

# Drivers whose default connection begins a transaction by itself, so a lock on it sits idle in
# transaction and the guard ends it; and those that leave the connection in autocommit.
IDLE_IN_TRANSACTION = ["psycopg2", "psycopg", "sqlalchemy+psycopg", "sqlalchemy+asyncpg", "django_atomic"]
AUTOCOMMIT = ["asyncpg", "django"]


def run_case(services, engines, driver, variant, backend="session"):
    if missing(driver):
        pytest.fail(f"driver {driver} needs {missing(driver)}: the test command installs .[drivers]")
    scenario = Cases()
    env = trial_env(services, engines, "cases", backend, variant, scenario.profile_params("quick"))
    env.spec = TrialSpec("cases", backend, variant, 0, driver=driver)
    measures = scenario.run_trial(env)
    return measures, verdict_of(scenario, measures, backend)


def test_every_driver_is_covered_by_one_expectation():
    assert sorted(IDLE_IN_TRANSACTION + AUTOCOMMIT) == sorted(DRIVERS)


@pytest.mark.parametrize("driver", IDLE_IN_TRANSACTION)
def test_a_default_connection_that_begins_a_transaction_loses_the_lock_to_the_idle_in_transaction_guard(
        services, engines, driver):
    m, verdict = run_case(services, engines, driver, "idle_in_transaction")
    assert m["holder_state"] == "idle in transaction"
    assert m["evidence"]["struck"] is True and verdict == "lost"
    assert m["held_after"] is False and m["release"].startswith("raised LockLost")  # and it is told so


@pytest.mark.parametrize("driver", AUTOCOMMIT)
def test_a_default_connection_in_autocommit_keeps_the_lock_through_that_guard(services, engines, driver):
    m, verdict = run_case(services, engines, driver, "idle_in_transaction")
    assert m["holder_state"] == "idle"
    assert verdict == "held" and m["held_after"] is True and m["release"] == "released"


@pytest.mark.parametrize("driver", AUTOCOMMIT)
def test_and_loses_it_to_idle_session_timeout_instead(services, engines, driver):
    m, verdict = run_case(services, engines, driver, "idle_session")
    assert m["evidence"]["struck"] is True and verdict == "lost"
