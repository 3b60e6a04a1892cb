"""The lock's own server stopped past the TTL (scenarios/server_pause.py), on the session's real Redis and etcd."""

import psutil
import pytest

from lab.checkers import ops
from scenarios.server_pause import ServerPause
from tests.server.test_lease_faults import run

pytestmark = pytest.mark.server


def test_a_stopped_redis_lets_the_lease_lapse_and_the_fence_alone_refuses_the_holder(services, engines):
    m, verdict = run(services, engines, ServerPause(), "redis")
    assert m["evidence"]["process_state"] == "T" and m["evidence"]["service"] == "redis", m["evidence"]
    # Who reaches the resumed server first, the holder's renewal or the contender, decides the lease; the
    # contender's requests that timed out meanwhile are in its history as acquires of unknown outcome.
    history = ops.from_json(m["history"])
    timed_out = any(o.process == "contender" and o.f is ops.F.ACQUIRE and o.type is ops.Type.INFO for o in history)
    assert verdict == ("stale write accepted" if m["contender"]["acquired"] else "held"), (verdict, timed_out)
    m, verdict = run(services, engines, ServerPause(), "redis_fenced")
    assert verdict in ("stale write rejected", "held"), verdict  # the fence never lets the stale write in
    server = services.embedded["redis"]
    assert all(psutil.Process(pid).status() != psutil.STATUS_STOPPED for pid in server.pids)  # healed


def test_a_lock_on_postgresql_is_not_run_here_never_n_a():
    """The fault would reach such a lock; the lab only will not pause the server every trial writes to: *not run*,
    which every decision counts as unknown, not n/a."""
    from backends import load
    from lab.checkers.outcomes import SkipKind, skip_kind_of

    reason = ServerPause().fault().applies_to(load("lease_row"))
    assert skip_kind_of(reason) is SkipKind.NOT_RUN and "every other trial" in reason


def test_it_strikes_the_lock_server_a_backend_declares_unless_that_is_redlocks_independent_masters(services):
    """Chosen by declaration: the backend's lock_service and what the lab's server of it is (Pausable, not
    RedlockMasters), never a list of names; a ZooKeeper lock qualifies the same way (tests/server/test_zookeeper.py)."""
    from backends import load

    fault = ServerPause().fault()
    assert fault.cannot_run(load("redis"), services) is None and fault.cannot_run(load("etcd_fenced"), services) is None
    assert fault.applies_to(load("redlock")) is None  # nothing in its declaration rules it out ...
    assert "independent Redis masters" in fault.cannot_run(load("redlock"), services)  # ... its server does
