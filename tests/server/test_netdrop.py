"""A real network drop (tc in a private network namespace): the server's keepalives end the lock's session
when lab doctor says they will, and what the holder's own libpq settings change for it."""

import socket

import pytest

from lab.servers.netns import NetNamespace
from scenarios.netdrop import NetDrop
from tests.server.helpers import quick_trial

# iproute2's ip, tc and ss, and root for the namespace: without them skipped with the install line.
pytestmark = [pytest.mark.server, pytest.mark.os_packages("iproute2", root=True)]


def run(services, engines, backend, variant):
    return quick_trial(services, engines, NetDrop(), backend, variant, "netdrop-")


def test_the_drop_takes_only_the_named_port_and_heals():
    ns = NetNamespace()
    try:
        def connect(port: int) -> bool:
            server = socket.create_server(("127.0.0.1", port))
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False
            finally:
                server.close()

        ns.drop_port(47001)
        assert ns.run(connect, 47001) is False  # the SYN vanished: no refusal, no reset, a timeout
        assert ns.run(connect, 47002) is True  # the namespace's other traffic goes on
        assert ns.dropped_packets() >= 1
        ns.allow_all()
        assert ns.run(connect, 47001) is True
        assert ns.dropped_packets() == 0
    finally:
        ns.allow_all()
        ns.close()


def test_the_server_ends_a_dropped_session_when_the_doctor_says_and_the_stale_write_is_accepted(services, engines):
    m, verdict = run(services, engines, "session_autocommit", "server_keepalives")
    k = m["keepalive"]
    assert k["session_ended"] and k["doctor_estimate_s"] == 2 + 2 * 1
    assert abs(k["ended_after_last_use_s"] - k["doctor_estimate_s"]) <= k["probe_interval_s"]
    assert m["evidence"]["packets_dropped"] >= 2  # the unanswered probes
    assert "Connection timed out" in m["evidence"]["server_log"]
    assert m["contender"]["acquired"] and verdict == "stale write accepted"
    # Nothing on the holder's side had noticed: its release on the dropped connection is still waiting.
    assert m["client"]["stuck_at"] == "release"


def test_tcp_user_timeout_tells_the_holder_within_its_timeout(services, engines):
    m, _ = run(services, engines, "session_autocommit", "client_user_timeout")
    release = m["client"]["steps"]["release"]
    assert "LockLost" in release["result"]
    held_at = m["client"]["steps"]["held"]["after_go_s"]
    assert release["after_go_s"] - held_at >= 1.5 - 0.1  # the unacknowledged query waited out tcp_user_timeout
