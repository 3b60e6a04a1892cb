"""One fault event for many subjects, without a server: which scenarios declare it, how the runner plans events
(subjects, ids), what a resumed run runs again, and how an event's subjects become records (each its own, one
floor per event) under a planted scenario whose subjects fail on purpose."""

import io
import threading
from collections import Counter

import pytest
from rich.console import Console
from rich.progress import Progress, TextColumn

import backends
import scenarios
from lab.errors import LabError
from lab.faults.base import FaultNotConfirmed
from lab.records.results import RunFolder
from lab.runner import RunContext, RunRequest, make_plan, resumed
from lab.runner.events import run_events
from lab.runner.progress import ScenarioProgress
from scenarios.base import FaultReach, Scenario
from scenarios.events import EventEnv, EventOutcome, SubjectOutcome, plan_events

PATRONI_VARIANTS = 7


def test_the_shared_fault_scenarios_declare_it_and_the_others_do_not():
    declared = {name for name in scenarios.names() if scenarios.load(name).fault_reach is FaultReach.ONE_EVENT}
    assert {"patroni", "failover", "sentinel"} <= declared
    assert "pause" not in declared and "cut" not in declared  # a fault on one holder's process or connection


def test_one_event_per_variant_and_repetition_serves_every_applicable_backend():
    patroni = scenarios.load("patroni")
    classes = [backends.load(name) for name in backends.names()]
    specs = patroni.plan(classes, "default")
    events = plan_events(specs)
    runnable = [spec for spec in specs if spec.skip is None]
    repetitions = patroni.profile_params("default")["trials"]
    assert repetitions == 3 and len(events) == PATRONI_VARIANTS * repetitions
    assert {event.id for event in events} == {f"patroni/{c.variant}/{i}" for c in patroni.columns
                                              for i in range(repetitions)}
    # every runnable trial is the subject of exactly one event, under the id it has always had
    subjects = [spec for event in events for spec in event.subjects]
    assert sorted(s.id for s in subjects) == sorted(s.id for s in runnable) and len(set(subjects)) == len(subjects)
    for event in events:
        assert {(s.variant, s.index) for s in event.subjects} == {(event.variant, event.index)}
        assert all(s.id == f"patroni/{s.backend}/{event.variant}/{event.index}" for s in event.subjects)
    # a fault of PostgreSQL reaches every lock with a part there: every backend but those wholly in MariaDB, the
    # fenced ones on etcd, Redis and ZooKeeper included
    in_postgres = {name for name in backends.names() if backends.load(name).where().parts_on("postgres")}
    assert {s.backend for s in events[0].subjects} == in_postgres and len(in_postgres) < len(backends.names())
    assert {"etcd_fenced", "redis_fenced", "zookeeper_fenced", "redis", "etcd"} <= {s.backend for s in subjects}
    assert not [spec for spec in specs if spec.skip is not None and spec in subjects]


def started_run(tmp_path, recorded):
    folder = RunFolder.create(tmp_path / "results", {"command": "lab run", "backends": ["session", "xact", "redis"],
                                                     "scenarios": ["patroni"], "profile": "default",
                                                     "backend_modules": []})
    for trial, status in recorded:
        folder.append({"id": trial, "status": status})
    return folder


def test_a_resumed_run_runs_an_interrupted_event_whole_and_a_finished_one_not_again(tmp_path):
    # agent_paused/0 ended with every subject recorded; crash/0 too, one subject an error; dcs_cut/0 was in flight
    # when the run stopped, so none of its records was kept
    folder = started_run(tmp_path, [(f"patroni/{b}/agent_paused/0", "ok") for b in ("session", "xact", "redis")]
                         + [("patroni/session/crash/0", "ok"), ("patroni/xact/crash/0", "error"),
                            ("patroni/redis/crash/0", "ok")])
    request, done = resumed(RunRequest([], [], "default", tmp_path / "results"), folder)
    events = {event.id: event for event in plan_events(make_plan(request, done).pending["patroni"])}
    assert "patroni/agent_paused/0" not in events
    assert [s.id for s in events["patroni/crash/0"].subjects] == ["patroni/xact/crash/0"]  # an error runs again
    assert {s.backend for s in events["patroni/dcs_cut/0"].subjects} == {"session", "xact", "redis"}
    assert len(events) == PATRONI_VARIANTS * 3 - 1


class PlantedEvent(Scenario):
    """An event scenario on no server: each subject's measures name it; `redis` raises on its own, as a library
    that refuses would; a variant `unconfirmed` is an event whose fault never confirms."""

    name = "planted_event"
    summary = "planted"
    fault_reach = FaultReach.ONE_EVENT
    variants = ("struck", "unconfirmed")
    params = {"default": {"trials": 2, "parallel": 2, "ttl_s": 0.0}}
    runs: list[str] = []

    def run_trial(self, env):
        raise AssertionError("an event scenario's trials run as events")

    def run_event(self, env: EventEnv) -> EventOutcome:
        self.runs.append(env.event.id)
        if env.event.variant == "unconfirmed":
            raise LabError("the fault did not confirm")
        outcomes = [SubjectOutcome(e.spec, failed=RuntimeError("its library refused"))
                    if e.spec.backend == "redis" else SubjectOutcome(e.spec, {"subject": e.spec.id})
                    for e in env.subjects]
        return EventOutcome(outcomes, evidence={"struck": env.event.id})

    def verdict(self, measures):
        return f"measured {measures['subject']}"


def run_planted(tmp_path, stop: threading.Event | None = None, planted: type[Scenario] = PlantedEvent):
    request = RunRequest(["session", "xact", "redis"], [], "default", tmp_path)
    scenario = planted()
    classes = [backends.load(name) for name in request.backends]
    from lab.runner import Plan

    plan = Plan([scenario], {scenario.name: scenario.plan(classes, "default")})
    folder = RunFolder.create(tmp_path / "results", {"command": "planted"})
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    ctx = RunContext(profile="default", plan=plan, services=None, monitor=None, writes=None, folder=folder,
                     progress=Progress(TextColumn(""), console=console, disable=True), sampler=None,
                     stop=stop or threading.Event(), waves={})
    shown = ScenarioProgress(console, ctx.progress, scenario.name, len(plan.pending[scenario.name]), events=4)
    finished = run_events(ctx, scenario, shown)
    return scenario, folder.trials(), finished, console.file.getvalue()


def test_each_subject_is_a_record_of_its_own_and_an_event_counts_once_in_the_bound(tmp_path):
    scenario, records, finished, _ = run_planted(tmp_path)
    assert sorted(scenario.runs) == ["planted_event/struck/0", "planted_event/struck/1",
                                     "planted_event/unconfirmed/0", "planted_event/unconfirmed/1"]
    by_id = {r["id"]: r for r in records}
    assert len(by_id) == len(records) == 12  # 3 subjects x 2 variants x 2 repetitions, each once
    ok = by_id["planted_event/session/struck/1"]
    assert ok["status"] == "ok" and ok["verdict"] == "measured planted_event/session/struck/1"  # its own measures
    assert ok["event"] == {"id": "planted_event/struck/1", "subjects": 3, "confirmed": {"struck": "planted_event/struck/1"}}
    refused = by_id["planted_event/redis/struck/1"]
    assert refused["status"] == "error" and "its library refused" in refused["reason"]  # an error of its own
    assert by_id["planted_event/xact/struck/1"]["status"] == "ok"  # beside it, untouched
    # an event whose fault does not confirm: every subject an error, none a verdict
    assert {by_id[f"planted_event/{b}/unconfirmed/0"]["status"] for b in ("session", "xact", "redis")} == {"error"}
    assert Counter(r["status"] for r in records) == {"ok": 4, "error": 8}
    assert len(finished.floors) == 2  # one floor per event that finished a subject: the bound counts it once


def test_a_stopped_run_keeps_no_record_of_an_event(tmp_path):
    stop = threading.Event()
    stop.set()
    scenario, records, finished, _ = run_planted(tmp_path, stop)
    assert records == [] and scenario.runs == [] and finished.floors == []


class UnconfirmedOnce(PlantedEvent):
    """Events whose fault does not confirm: `late` the first time each event runs, `never` every time."""

    name = "planted_unconfirmed"
    variants = ("late", "never")
    params = {"default": {"trials": 1, "parallel": 2, "ttl_s": 0.0}}

    def run_event(self, env: EventEnv) -> EventOutcome:
        self.runs.append(env.event.id)
        if env.event.variant == "never" or self.runs.count(env.event.id) == 1:
            raise FaultNotConfirmed("no failover within 30 s")
        return EventOutcome([SubjectOutcome(e.spec, {"subject": e.spec.id}) for e in env.subjects], evidence={})


def test_an_event_whose_fault_did_not_confirm_runs_once_more_and_both_attempts_stay_on_record(tmp_path):
    """A fault that never struck is no trial: the event runs again on fresh trial envs, its first attempt's errors
    stay in trials.jsonl, and each trial's latest record is its result. A fault that never confirms is an error
    after its one retry; an event that broke another way (PlantedEvent's LabError) is not retried."""
    from lab.checkers.outcomes import latest_per_trial

    scenario, records, finished, _ = run_planted(tmp_path, planted=UnconfirmedOnce)
    assert Counter(scenario.runs) == {"planted_unconfirmed/late/0": 2, "planted_unconfirmed/never/0": 2}
    late = [r for r in records if r["id"] == "planted_unconfirmed/session/late/0"]
    assert [r["status"] for r in late] == ["error", "ok"] and "no failover" in late[0]["reason"]
    latest = {r["id"]: r["status"] for r in latest_per_trial(records)}
    assert Counter(latest.values()) == {"ok": 3, "error": 3}  # late's three subjects ok, never's three errors
    assert len(finished.floors) == 1
    scenario, records, _, _ = run_planted(tmp_path / "other", planted=PlantedEvent)
    assert Counter(scenario.runs)["planted_event/unconfirmed/0"] == 1


@pytest.fixture(autouse=True)
def _fresh_runs():
    PlantedEvent.runs = []
