"""`lab run --resume`: the request comes from the run's meta.json as a new one, the caller's is left as it was,
and every recorded trial but an errored one counts as done."""

import copy

from lab.records.results import RunFolder
from lab.runner import RunRequest, make_plan, resumed
from lab.servers.postgres.drivers import DEFAULT as DEFAULT_DRIVER


TRIALS = ("cases/session/idle_in_transaction/0", "cases/xact/-/0", "cases/session/idle_session/0")


def started_run(tmp_path, **meta):
    folder = RunFolder.create(tmp_path / "results", {"command": "lab run", "backends": ["session", "xact"],
                                                     "scenarios": ["cases"], "profile": "quick",
                                                     "backend_modules": [], **meta})
    for trial, status in zip(TRIALS, ("ok", "skipped", "error")):
        folder.append({"id": trial, "status": status})
    return folder


def test_resume_returns_a_new_request_from_meta_and_leaves_the_given_one_alone(tmp_path):
    folder = started_run(tmp_path, drivers=["psycopg2", "asyncpg"])
    given = RunRequest(backends=[], scenarios=[], profile="default", results_root=tmp_path / "results",
                       argv=["run", "--resume", folder.run_id], resume=folder.run_id,
                       fault_commands={"restart": "true"})
    before = copy.deepcopy(given)

    request, done = resumed(given, folder)

    assert given == before  # not one field rewritten
    assert request is not given
    assert (request.backends, request.scenarios, request.profile, request.drivers) == (
        ["session", "xact"], ["cases"], "quick", ["psycopg2", "asyncpg"])
    assert (request.resume, request.argv, request.fault_commands) == (given.resume, given.argv, given.fault_commands)
    assert done == set(TRIALS[:2])  # the errored one runs again


def test_a_run_from_before_drivers_resumes_on_the_default_driver(tmp_path):
    request, _ = resumed(RunRequest([], [], "default", tmp_path / "results"), started_run(tmp_path))
    assert request.drivers == [DEFAULT_DRIVER]


def test_the_resumed_plan_leaves_out_what_is_done(tmp_path):
    request, done = resumed(RunRequest([], [], "default", tmp_path / "results"), started_run(tmp_path))
    pending = {spec.id for specs in make_plan(request).pending.values() for spec in specs}
    resumed_pending = {spec.id for specs in make_plan(request, done).pending.values() for spec in specs}
    assert done <= pending and resumed_pending == pending - done
