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
