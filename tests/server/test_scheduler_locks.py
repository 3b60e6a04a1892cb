"""The locks a scheduler or a job queue takes for you, on real servers: celery-redbeat's beat lock in Redis (a beat
started with the library's beat_init receiver, kept by its tick(), given back by its close()) and procrastinate's
job lock in PostgreSQL (jobs deferred with one `lock`, run one at a time by its workers)."""

from __future__ import annotations

import pytest

from scenarios.cut import Cut
from scenarios.overlap import Overlap
from scenarios.pause import Pause
from scenarios.restart import Restart
from scenarios.server_pause import ServerPause
from tests.server.helpers import outcome_of, trial_env
from tests.server.test_lease_faults import no_holder_left

pytestmark = pytest.mark.server
NOT_OWNED = "LockNotOwnedError: Cannot extend a lock that's no longer owned"  # redis-py's, from redbeat's tick()


def run(services, engines, scenario, backend, variant=None, **params):
    """One trial on the quick profile's parameters, with any of them given here instead."""
    variant = variant or scenario.variants[0]
    env = trial_env(services, engines, scenario.name, backend, variant, {**scenario.profile_params("quick"), **params})
    measures = scenario.run_trial(env)
    assert no_holder_left()
    return measures, outcome_of(scenario, measures, backend)


def told(measures: dict, via: str) -> list[str]:
    return [s["text"] for s in measures["holder"]["signals"] if s["via"] == via]


# --- RedBeat ----------------------------------------------------------------------------------------------------

@pytest.fixture
def redbeat():
    pytest.importorskip("redbeat", reason="celery-redbeat not installed (pip install -e '.[libraries]')")


def test_redbeat_keeps_a_second_beat_out_while_the_first_ticks(services, engines, redbeat):
    measures, outcome = run(services, engines, Overlap(), "redbeat")
    assert outcome["verdict"] == "held" and measures["runs"][1]["outcome"] == "refused"


@pytest.mark.parametrize("scenario", [Pause(), Cut(), Restart()], ids=["pause", "cut", "restart"])
def test_a_beat_that_lost_its_lock_hears_it_from_its_next_tick_and_writes_anyway(services, engines, redbeat,
                                                                                scenario):
    """The key lapsed (a pause, a cut past the TTL) or vanished (a restart of a Redis without persistence); a second
    beat took it; the first beat's tick() raised LockNotOwnedError (redbeat's extend checks the token now), yet its
    job's write, already under way, was accepted: no fence."""
    measures, outcome = run(services, engines, scenario, "redbeat")
    assert outcome["verdict"] == "stale write accepted", measures
    assert measures["contender"]["granted_at"] < measures["holder"]["write_at"]
    assert NOT_OWNED in told(measures, "renew()"), measures["holder"]["signals"]
    assert measures["holder"]["release"] == "raised LockLost: the lease was no longer ours at release"


def test_a_paused_redis_keeps_the_beat_lock_until_it_runs_again(services, engines, redbeat):
    """Redis' own clock times the key: stopped, it grants nobody; the holder's tick times out meanwhile."""
    measures, outcome = run(services, engines, ServerPause(), "redbeat")
    assert measures["evidence"]["process_state"] == "T"
    # who reaches Redis first on SIGCONT; the contender asks on after it, so it may also get in after the holder's write
    assert outcome["verdict"] in ("held", "intact (250 rows)", "stale write accepted"), measures
    assert any(text.startswith("TimeoutError") for text in told(measures, "renew()")), measures["holder"]["signals"]


# --- procrastinate ------------------------------------------------------------------------------------------------

@pytest.fixture
def procrastinate():
    pytest.importorskip("procrastinate", reason="procrastinate not installed (pip install -e '.[libraries]')")


def test_jobs_of_one_lock_run_one_at_a_time(services, engines, procrastinate):
    measures, outcome = run(services, engines, Overlap(), "procrastinate")
    assert outcome["verdict"] == "held" and measures["rows_final"] == 250
    assert measures["runs"][1]["outcome"] == "refused"  # its job stayed todo behind the doing one


@pytest.mark.parametrize("scenario", [Pause(), Cut()], ids=["pause", "cut"])
def test_a_stalled_workers_job_is_retried_by_the_docs_recipe_and_both_workers_run_it(services, engines,
                                                                                   procrastinate, scenario):
    """The holder's worker stopped heartbeating (paused, or cut from PostgreSQL) past the TTL: the stalled-job recipe
    put its job back to todo, the contender's worker fetched it and rebuilt the company, and the holder's task, which
    never heard, wrote too. Its release finds the job another worker's."""
    measures, outcome = run(services, engines, scenario, "procrastinate")
    assert outcome["verdict"] == "stale write accepted", measures
    assert measures["contender"]["granted_at"] < measures["holder"]["write_at"]
    assert measures["holder"]["release"].startswith("raised LockLost: its job was no longer this worker's")


def test_a_restarted_postgresql_keeps_the_job_doing_and_nobody_else_gets_in(services, engines, procrastinate):
    """The lock is a job's status, a row: it survives the restart, the worker reconnects and heartbeats within the
    TTL, so the stalled-job recipe finds nothing; the contender stays out. The claim needs a restart shorter than the
    TTL: the quick profile's 1 s was not, once, on a loaded machine (the heartbeat came late, the recipe retried the
    job, and the contender got in: the lock's real behaviour past its TTL), so this trial holds its lease for 4 s."""
    measures, outcome = run(services, engines, Restart(), "procrastinate", ttl_s=4.0)
    before, after = measures["evidence"]["pids_before"], measures["evidence"]["pids_after"]
    assert before and after and not set(before) & set(after)
    assert outcome["verdict"] == "held" and not measures["contender"]["acquired"], measures
    assert measures["holder"]["release"] == "released"
