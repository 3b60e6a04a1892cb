"""The timing runs and the lookalikes on a real PostgreSQL: the timer decides, and only it."""

import pytest

from scenarios.lookalikes import Lookalikes
from scenarios.timing import Timing
from tests.server.helpers import outcome_of, trial_env

pytestmark = pytest.mark.server


def run(services, engines, scenario, backend, variant):
    env = trial_env(services, engines, scenario.name, backend, variant, scenario.profile_params("quick"))
    measures = scenario.run_trial(env)
    return measures, outcome_of(scenario, measures, backend)["verdict"]


@pytest.mark.parametrize("backend", ["session", "redis"])
def test_a_short_run_gets_in_only_after_the_timeout(services, engines, backend):
    m, verdict = run(services, engines, Timing(), backend, "event")
    timeout = m["timeout_s"]
    assert verdict == "lost"
    # Never before the timer; and within a few event gaps after it (events come every timeout/10 on average).
    assert timeout <= m["first_got_at"] <= timeout * 1.6, m


@pytest.mark.parametrize("backend", ["session_autocommit", "etcd"])
def test_no_short_run_gets_in_when_nothing_ends_the_lock(services, engines, backend):
    m, verdict = run(services, engines, Timing(), backend, "cron")
    assert verdict == "held" and m["attempts"] >= 5
    assert outcome_of(Timing(), m, backend)["exercised"] is False  # nothing took the lock away


def test_a_lock_inside_an_idle_transaction_is_freed_by_the_timeout(services, engines):
    m, verdict = run(services, engines, Timing(), "xact", "event")
    assert m["first_got_at"] >= m["timeout_s"]
    assert m["holder_state_at_end"] == "gone"  # the server ended the idle transaction, and its lock with it
    # ...so the short run got in after the holder's work rolled back, as under a pause: rolled back, safe.
    outcome = outcome_of(Timing(), m, "xact")
    assert (verdict, outcome["safety"], outcome["exercised"]) == ("rolled back", "safe", True)


@pytest.mark.parametrize("backend", ["session", "redis_fenced"])
def test_a_lock_that_times_out_is_lost_and_no_write_is_judged(services, engines, backend):
    """A timing trial never writes: a fenced lock and an unfenced one both read 'lost', safety untested."""
    m, _ = run(services, engines, Timing(), backend, "event")
    outcome = outcome_of(Timing(), m, backend)
    assert (outcome["verdict"], outcome["safety"], outcome["judgement"]["lock"]) == ("lost", "untested", "false")


def test_idle_session_timeout_leaves_a_default_connection_in_its_transaction(services, engines):
    m, verdict = run(services, engines, Lookalikes(), "session", "idle_session_in_transaction")
    assert m["state"] == "idle in transaction" and m["other_got_lock"] is False and m["server_said"] is None
    assert verdict == "as the post says"


def test_pool_recycle_does_not_touch_a_checked_out_lock_connection(services, engines):
    m, verdict = run(services, engines, Lookalikes(), "session", "pool_recycle_checked_out")
    assert m["held_while_checked_out"] and m["same_session"]
    assert m["recycled_at_checkout"] and m["other_got_lock_after"]  # recycle does act, at the next checkout
    assert verdict == "as the post says"


def test_close_keeps_the_session_lock_and_invalidate_frees_it(services, engines):
    m, verdict = run(services, engines, Lookalikes(), "session", "close_keeps_lock")
    assert m["held_after_close"] and not m["other_got_lock_after_close"]
    assert m["other_got_lock_after_invalidate"]
    assert verdict == "as the post says"
