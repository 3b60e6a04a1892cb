"""The post's session-lock cases on a real PostgreSQL, each lost or held for the post's reason."""

import pytest

from backends.base import BackendContext
from backends.session import SessionLock
from backends.session_autocommit import SessionLockAutocommit
from lab.errors import LockLost
from lab.faults import idle_in_transaction_timeout, idle_session_timeout
from lab.servers.postgres import sql as pg
from scenarios.cases import Cases
from tests.server.helpers import trial_env, wait_session_gone, verdict_of

pytestmark = pytest.mark.server

TIMEOUT = 1.0

# case, backend, variant, holder state the post names as the reason, lost?, what the server log says
CASES = [
    ("A", "session", "idle_in_transaction", "idle in transaction", True,
     "terminating connection due to idle-in-transaction timeout"),
    ("B", "session_autocommit", "idle_in_transaction", "idle", False, None),
    ("C", "session_commit", "idle_in_transaction", "idle", False, None),
    ("D", "session_commit", "query_then_idle_in_transaction", "idle in transaction", True,
     "terminating connection due to idle-in-transaction timeout"),
    ("E", "session_autocommit", "idle_session", "idle", True,
     "terminating connection due to idle-session timeout"),
]


@pytest.mark.parametrize("case, backend, variant, state, lost, server_said", CASES, ids=[c[0] for c in CASES])
def test_post_case(services, engines, case, backend, variant, state, lost, server_said):
    scenario = Cases()
    env = trial_env(services, engines, "cases", backend, variant, {"timeout_s": TIMEOUT})
    m = scenario.run_trial(env)
    assert m["case"] == case
    assert m["acquired"] is True
    assert m["holder_state"] == state  # the reason: in a transaction or not
    assert [p["got"] for p in m["probes"]] == [False, lost]
    assert verdict_of(scenario, m, backend) == ("lost" if lost else "held")
    assert m["held_after"] is (not lost)
    assert m["next_query"] == ("OperationalError" if lost else "alive")
    assert m["release"].startswith("raised LockLost" if lost else "released")
    assert m["server_said"] == server_said


def holder(services, engines, cls, settings, key):
    monitor, writes = engines
    return cls(BackendContext(services, monitor, writes, None, settings), key)


def test_after_the_timeout_held_is_false_and_release_raises(services, engines):
    monitor, _ = engines
    lock = holder(services, engines, SessionLock,
                  idle_in_transaction_timeout(TIMEOUT).session_settings(), "test:held-then-lost")
    try:
        assert lock.acquire() and lock.held()
        wait_session_gone(monitor, lock.lock_pid)
        assert lock.held() is False
        with pytest.raises(LockLost):
            lock.release()
    finally:
        lock.close()


def test_a_relock_after_loss_would_lie_but_held_does_not(services, engines):
    """The post's warning: pg_try_advisory_lock after a loss succeeds on a new session."""
    monitor, _ = engines
    lock = holder(services, engines, SessionLockAutocommit,
                  idle_session_timeout(TIMEOUT).session_settings(), "test:relock")
    fresh = holder(services, engines, SessionLockAutocommit, {}, "test:relock")
    try:
        assert lock.acquire()
        wait_session_gone(monitor, lock.lock_pid)
        assert fresh.acquire() is True  # looks like success
        assert lock.held() is False  # pg_locks for the holder's own pid tells the truth
    finally:
        lock.close()
        fresh.close()


def test_release_of_a_held_lock_succeeds_once(services, engines):
    lock = holder(services, engines, SessionLockAutocommit, {}, "test:release-once")
    try:
        assert lock.acquire() and lock.held()
        lock.release()
        assert lock.held() is False
        with pytest.raises(LockLost, match="did not hold"):
            lock.release()
    finally:
        lock.close()


def test_a_setting_the_server_is_too_old_for_is_named(engines):
    monitor, _ = engines
    version = pg.server_version_num(monitor)
    assert idle_session_timeout(1).unsupported_reason(version) is None
    assert idle_session_timeout(1).unsupported_reason(130000) == "idle_session_timeout needs PostgreSQL 14+"
