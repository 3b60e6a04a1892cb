"""A run's holders are forked from one process (lab/holder/forks.py): a trial with a forked holder reaches
the same verdicts, by the same events, as one with a holder started fresh."""

from __future__ import annotations

import pytest

from lab.holder import forks
from tests.server.helpers import trial_env, verdict_of

pytestmark = pytest.mark.server


@pytest.mark.parametrize("backend, expected", [("redis", "stale write accepted"), ("lease_row", "stale write rejected")])
def test_a_paused_forked_holder_gives_the_verdict_a_fresh_one_gives(services, engines, backend, expected):
    from scenarios.pause import Pause

    scenario = Pause()
    params = scenario.profile_params("quick")
    fresh = scenario.run_trial(trial_env(services, engines, "pause", backend, "sigstop", params))
    forks.open_server()
    try:
        server = forks._server
        assert server is not None
        forked = scenario.run_trial(trial_env(services, engines, "pause", backend, "sigstop", params))
        assert server.forked == 1  # this trial's holder came from the server
    finally:
        forks.close_server()
    assert verdict_of(scenario, fresh, backend) == verdict_of(scenario, forked, backend) == expected
    assert forked["evidence"]["process_state"] == "T"
    for key in ("granted", "write", "held_after", "release"):  # the holder's own report, step by step
        assert forked["holder"][key] == fresh["holder"][key], key


def test_a_holder_forked_for_a_network_namespace_runs_inside_it():
    """A trial's holder in a namespace of its own (slow_network, netdrop) is forked too, and lives in that
    namespace from its first instruction, as a fresh one started there does: the kernel names the same one."""
    import os
    import time

    from lab.servers.netns import NamespaceUnavailable, NetNamespace

    try:
        namespace = NetNamespace()
    except NamespaceUnavailable as exc:
        pytest.skip(f"no network namespace here: {exc}")
    forks.open_server()
    try:
        holder = forks.fork(namespace.fd)
        assert holder is not None, "the fork server refused a namespace"
        try:
            wanted, seen = os.readlink(f"/proc/self/fd/{namespace.fd}"), None
            deadline = time.monotonic() + 10  # the child enters first thing; the answer may come before it runs
            while time.monotonic() < deadline and (seen := os.readlink(f"/proc/{holder.pid}/ns/net")) != wanted:
                time.sleep(0.01)
            assert seen == wanted != os.readlink("/proc/self/ns/net")
            assert holder.poll() is None  # alive, waiting for its spec
        finally:
            holder.kill()
            holder.wait(5)
    finally:
        forks.close_server()
        namespace.close()
