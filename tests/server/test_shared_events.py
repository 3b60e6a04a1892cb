"""Subjects sharing one fault event cannot disturb one another's verdicts: a real failover (a primary and a standby
of the event's own) struck once for several locks, with and without planted failures beside them.

Well-behaved locks run each by itself (an event of one subject, as a trial), then together in one event, then beside
a lock that always grants (the checkers must find its exclusion broken) and a lock whose acquire raises (an error of
its own): each well-behaved lock's verdict is the same all three ways, and each subject's record is judged on its
own history, as the runner records it.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import backends
from lab.runner.events import subject_record
from scenarios.events import EventEnv, EventSpec
from scenarios.failover import Failover
from tests.server import planted_backends
from tests.server.helpers import processes_under, trial_env
from tests.server.test_lease_faults import no_holder_left

pytestmark = pytest.mark.server

# Locks whose verdict under an asynchronous failover does not depend on a race (each the same in every trial of
# every run here): a session lock lost with the crashed primary, a replicated lease kept, a lock inside the write
# rolled back, an etcd lock fenced in PostgreSQL held, a Redis lock without a fence outlived by its TTL.
WELL_BEHAVED = ("session_autocommit", "lease_row", "xact", "etcd_fenced", "redis")


def plant(monkeypatch, cls) -> str:
    monkeypatch.setitem(backends.REGISTRY.entries, cls.name, f"{cls.__module__}:{cls.__name__}")
    return cls.name


def shared(services, engines, names: tuple[str, ...], variant: str = "async") -> tuple[dict, dict]:
    """One event of the failover scenario for these backends: each subject's record as the runner keeps it, by
    backend, and the event's evidence."""
    scenario = Failover()
    params = scenario.profile_params("quick")
    run_id = f"test-{time.monotonic_ns()}"
    envs = [trial_env(services, engines, scenario.name, name, variant, params, run_id=run_id) for name in names]
    event = EventSpec(scenario.name, variant, 0, tuple(env.spec for env in envs))
    outcome = scenario.run_event(EventEnv.of(event, envs))
    return {o.spec.backend: subject_record(scenario, o, outcome, event, {}) for o in outcome.subjects}, outcome.evidence


def nothing_left(services) -> None:
    assert no_holder_left()
    assert not [p for p in processes_under(services.tmp) if "failover-" in p], "an event left a server running"


def verdict(record: dict) -> tuple:
    """What a verdict says, without the times of the operations that prove it (each event has its own clock)."""
    judgement = record["judgement"]
    return (record["status"], record["verdict"], record["safety"], record.get("exercised"), judgement["lock"],
            tuple(sorted((f["checker"], f["valid"]) for f in judgement["findings"])))


def test_a_planted_failure_in_one_subject_leaves_every_other_verdict_as_it_is_without_it(services, engines,
                                                                                         monkeypatch):
    always = plant(monkeypatch, planted_backends.AlwaysGrants)
    raises = plant(monkeypatch, planted_backends.RaisesAt_acquire)

    with ThreadPoolExecutor(len(WELL_BEHAVED)) as pool:  # each a trial by itself: an event of one subject
        alone = {name: found[0][name] for name, found in
                 zip(WELL_BEHAVED, pool.map(lambda name: shared(services, engines, (name,)), WELL_BEHAVED))}
    together, _ = shared(services, engines, WELL_BEHAVED)
    beside, evidence = shared(services, engines, (always, *WELL_BEHAVED, raises))
    nothing_left(services)

    assert all(alone[name]["status"] == "ok" for name in WELL_BEHAVED)
    verdicts = [{name: verdict(records[name]) for name in WELL_BEHAVED} for records in (alone, together, beside)]
    assert verdicts[0] == verdicts[1] == verdicts[2]
    # the planted failures are their own subjects' findings, and nobody else's
    assert beside[always]["status"] == "ok" and beside[always]["judgement"]["lock"] == "false"
    assert beside[always]["safety"] == "unsafe"
    assert beside[raises]["status"] == "error" and "planted in acquire" in beside[raises]["reason"]
    # one strike served them all: every subject's record names the same event and the same confirmation
    assert evidence["timeline_after"] > evidence["timeline_before"]
    assert {beside[name]["event"]["id"] for name in beside} == {"failover/async/0"}
    assert all(beside[name]["event"]["confirmed"] == evidence for name in beside)
    assert all(beside[name]["event"]["subjects"] == len(WELL_BEHAVED) + 2 for name in beside)


def test_each_subject_has_its_own_company_table_and_keys(services, engines):
    records, _ = shared(services, engines, ("session_autocommit", "lease_row"), variant="async_lagging")
    nothing_left(services)
    measures = [records[name]["measures"] for name in ("session_autocommit", "lease_row")]
    companies = [next(iter(m["final"])) for m in measures]
    assert len(set(companies)) == 2  # a company of its own
    for record, company in zip(records.values(), companies):
        written = {op["value"].get("company") for op in record["history"] if op["f"] == "write"}
        assert written == {int(company)}  # its history holds its own company's writes, and nobody else's
