"""The added trials (issue 56): which cells get them, when a cell has enough, what a round runs, and, as a property
over planted cells, that the rounds stay within the budget and a deciding cell gets no trial after its first
failure."""

from __future__ import annotations

import heapq
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from lab.report.sections import RunView
from lab.runner.plan import SettleAsk
from lab.runner.settle import DEFAULT_MINUTES, NO_PREVIOUS, Settling
from lab.runner.settle_cells import cells_to_settle
from lab.runner.settle_rounds import Ledger, SettleGate, Templates, cell_of, event_round, trial_round
from lab.runner.settle_rule import (AT_MOST, IDLE_AFTER, RATE_TRIALS, Ended, Harm, SettleTarget, StopRule, Tally, Why,
                                    clean_bound, failed, trials_for_bound)
from lab.runner.waves import Dispatch, SessionBudget
from scenarios.base import TrialSpec
from tests.fast.planted import trial
from tests.fast.test_decision import META


def kept(backend, n, *, scenario="pause", variant="sigstop", kind=None, exercised=True, start=0):
    kind = kind or {"none": "intact", "xact": "rolled back"}.get(backend, "stale write rejected")
    return [trial(scenario, variant, backend, kind, index=i, exercised=exercised) for i in range(start, start + n)]


def stale(backend, *, scenario="pause", variant="sigstop", index=0):
    return trial(scenario, variant, backend, "stale write accepted", index=index, lock="false",
                 findings=(("stale write", "stale write accepted"),))


# --- the stopping rule -------------------------------------------------------------------------------------------

def test_the_declared_bound_takes_20_exercised_trials_none_failed():
    assert trials_for_bound() == 20
    assert clean_bound(20) <= 0.14 < clean_bound(19)
    assert round(clean_bound(3), 2) == 0.63


def test_a_deciding_cell_stops_at_its_first_failure_or_at_the_bound_and_an_idle_trial_does_not_count():
    rule = StopRule.for_(Why.DECIDING)
    assert rule.ended(Tally(finished=4, exercised=3, failures=1)) is Ended.FAILURE_FOUND
    assert rule.ended(Tally(finished=20, exercised=20)) is Ended.BOUND_REACHED
    assert rule.ended(Tally(finished=25, exercised=19)) is None  # six trials the fault did not reach: no evidence
    assert rule.wanted(Tally(finished=3, exercised=3)) == 17
    assert rule.wanted(Tally(finished=4, exercised=2)) == AT_MOST - 4  # 36 at its share of one in two, capped
    assert rule.ended(Tally(finished=IDLE_AFTER, exercised=0)) is Ended.NEVER_EXERCISED
    assert rule.wanted(Tally(finished=3, exercised=0)) == IDLE_AFTER - 3
    assert rule.ended(Tally(finished=30, exercised=10, errors=10)) is Ended.AT_MOST
    assert rule.ended(Tally(finished=3, exercised=3, skipped=37)) is Ended.AT_MOST  # added trials that cannot run


def test_a_flipped_cell_runs_past_its_first_failure_to_state_a_rate():
    rule = StopRule.for_(Why.FLIPPED)
    assert rule.ended(Tally(finished=5, exercised=5, failures=1)) is None
    assert rule.wanted(Tally(finished=5, exercised=5, failures=1)) == RATE_TRIALS - 5
    assert rule.ended(Tally(finished=RATE_TRIALS, exercised=8, failures=4)) is Ended.RATE_STATED
    assert rule.ended(Tally(finished=RATE_TRIALS, exercised=0)) is Ended.RATE_STATED  # ○ 20 times is a rate too
    both = StopRule.for_(Why.DECIDING | Why.FLIPPED)
    assert both.ended(Tally(finished=19, exercised=19)) is None
    assert both.ended(Tally(finished=20, exercised=20)) is Ended.BOUND_REACHED
    assert both.ended(Tally(finished=6, exercised=6, failures=1)) is None
    assert both.ended(Tally(finished=20, exercised=9, failures=3)) is Ended.RATE_STATED


def test_a_trial_fails_its_cell_by_the_harm_its_need_is_judged_on():
    lost = trial("cases", "idle_in_transaction", "session", "held", lock="false")
    lost.update(safety="untested", verdict="lost")
    lost["judgement"].update(kind="lost", safety="untested")
    fenced = trial("pause", "sigstop", "etcd_fenced", "stale write rejected", lock="false")
    never = {**lost, "judgement": {**lost["judgement"], "kind": "not acquired", "lock": "true"}}
    assert failed(stale("xact"), Harm.SURVIVING_COMPANY) and failed(lost, Harm.SURVIVING_COMPANY)
    assert not failed(fenced, Harm.SURVIVING_COMPANY) and failed(fenced, Harm.TWO_HOLDERS)
    assert not failed(never, Harm.SURVIVING_COMPANY)  # its holder was never granted: it tested nothing
    errored = {"id": "x", "status": "error"}
    assert Tally.of([stale("xact"), *kept("xact", 2, start=1), errored]) == Tally(3, 3, 1, 1)


# --- which cells ---------------------------------------------------------------------------------------------------

def test_every_candidate_under_a_fault_that_failed_one_of_them_decides_and_the_control_does_not():
    trials = [*kept("none", 3), *kept("xact", 3), stale("etcd_fenced"),
              *kept("none", 3, scenario="patroni", variant="agent_paused"),
              *kept("xact", 3, scenario="patroni", variant="agent_paused")]
    targets = cells_to_settle(RunView.of(trials, META))
    assert [(t.scenario, t.backend, t.why) for t in targets] == [("pause", "xact", Why.DECIDING),
                                                                  ("pause", "etcd_fenced", Why.DECIDING)]
    assert targets[0].rule == StopRule.for_(Why.DECIDING) and targets[0].variant == "sigstop"


def test_a_cell_whose_mark_changed_against_a_previous_reference_is_flipped_whatever_its_marks():
    now = [*kept("none", 3), *kept("xact", 3), *kept("etcd_fenced", 3, exercised=False)]  # ○ now
    before = [*kept("none", 3), *kept("xact", 3), stale("etcd_fenced")]  # ✗ then
    targets = cells_to_settle(RunView.of(now, META), [before])
    assert [(t.backend, t.why) for t in targets] == [("etcd_fenced", Why.FLIPPED)]
    assert cells_to_settle(RunView.of(now, META), [now]) == []  # the same marks: nothing flipped
    other = [r for r in before if r["backend"] != "etcd_fenced"]
    assert cells_to_settle(RunView.of(now, META), [other]) == []  # a cell one reference did not run: no flip
    # Between two earlier references too: ✓ now as then, but ✗ in the one before.
    steady = [*kept("none", 3), *kept("xact", 3), *kept("etcd_fenced", 3)]
    assert [t.why for t in cells_to_settle(RunView.of(steady, META), [before, steady])] == [Why.FLIPPED]


def test_a_kill_point_search_and_a_driver_row_are_never_deciding():
    meta = {**META, "measured": {"pause": "kill_point_search"}}
    trials = [*kept("none", 3), *kept("xact", 3), stale("etcd_fenced")]
    assert cells_to_settle(RunView.of(trials, meta)) == []
    on_driver = [{**r, "backend": "xact@asyncpg", "driver": "asyncpg", "id": r["id"] + "@"} for r in kept("xact", 3)]
    assert {t.backend for t in cells_to_settle(RunView.of(trials + on_driver, META))} == {"xact", "etcd_fenced"}


# --- what a round runs ---------------------------------------------------------------------------------------------

def plan_of(backends, *, scenario="pause", variant="sigstop", planned=3):
    return [TrialSpec(scenario, b, variant, i) for b in backends for i in range(planned)]


def test_a_round_interleaves_its_cells_and_continues_each_index_past_the_plan_and_the_records():
    templates = Templates.of(plan_of(["xact", "etcd_fenced"], planned=4))  # a sequential-rule trial at index 3
    ledger = Ledger([*kept("xact", 3), *kept("etcd_fenced", 3), *kept("etcd_fenced", 2, start=10)])
    targets = [SettleTarget.of("pause", "sigstop", b, Why.FLIPPED) for b in ("xact", "etcd_fenced")]
    specs = trial_round(targets, ledger, templates)
    assert [(s.backend, s.index) for s in specs[:4]] == [("xact", 4), ("etcd_fenced", 12), ("xact", 5),
                                                          ("etcd_fenced", 13)]
    assert len([s for s in specs if s.backend == "xact"]) == RATE_TRIALS - 3
    assert len({s.id for s in specs}) == len(specs)


def test_a_shared_event_columns_rounds_are_its_open_cells_events_one_after_another():
    templates = Templates.of(plan_of(["none", "xact", "etcd_fenced"], scenario="patroni", variant="agent_paused"))
    ledger = Ledger([*kept("none", 3, scenario="patroni", variant="agent_paused"),
                     *kept("xact", 3, scenario="patroni", variant="agent_paused"),
                     stale("etcd_fenced", scenario="patroni", variant="agent_paused")])
    targets = [SettleTarget.of("patroni", "agent_paused", b, Why.DECIDING) for b in ("xact", "etcd_fenced")]
    specs = event_round(targets, ledger, templates)
    # etcd_fenced failed: settled, not a subject; xact's 17 rounds, one event each, past the column's every index
    assert [(s.backend, s.index) for s in specs] == [("xact", i) for i in range(3, 3 + trials_for_bound() - 3)]
    gate = SettleGate(targets, ledger, deadline=1e12, fallback_s=1.0, sequential=True)
    gate.started(specs[0])
    assert gate.later(specs[1])  # the column's next event waits for the one in flight
    gate.kept(trial("patroni", "agent_paused", "xact", "rolled back", index=3))
    assert not gate.later(specs[1]) and gate.needed(specs[1])


def test_the_gate_drops_a_cells_trials_after_its_first_failure_and_those_the_deadline_would_cut():
    now = [100.0]
    ledger = Ledger(kept("xact", 3))
    target = SettleTarget.of("pause", "sigstop", "xact", Why.DECIDING)
    gate = SettleGate([target], ledger, deadline=110.0, fallback_s=1.0, clock=lambda: now[0])
    spec = TrialSpec("pause", "xact", "sigstop", 3)
    assert gate.needed(spec)
    now[0] = 109.5  # a trial of this cell takes 1 s (its median): it would end after the deadline
    assert not gate.needed(spec)
    now[0] = 100.0
    gate.kept(stale("xact", index=3))
    assert not gate.needed(TrialSpec("pause", "xact", "sigstop", 4))
    assert not gate.needed(TrialSpec("pause", "etcd_fenced", "sigstop", 4))  # no target: nothing to add


def test_the_budget_is_the_runs_whole_and_a_resume_settles_on_with_what_is_left():
    fresh = Settling.asked(SettleAsk(previous=(NO_PREVIOUS,)), None)
    assert (fresh.budget_s, fresh.previous) == (DEFAULT_MINUTES * 60, ())
    recorded = {"budget_s": 600.0, "spent_s": 200.0, "previous": [{"run": "r", "path": "/results/r"}]}
    resumed = Settling.asked(SettleAsk(), recorded)
    assert (resumed.left_s, resumed.previous) == (400.0, ("/results/r",))
    more = Settling.asked(SettleAsk(minutes=5), recorded)
    assert (more.budget_s, more.left_s) == (500.0, 300.0)


# --- the property --------------------------------------------------------------------------------------------------

def record(spec: TrialSpec, fails: bool, exercised: bool, seconds: float) -> dict:
    base = stale(spec.backend, index=spec.index) if fails else trial(
        "pause", "sigstop", spec.backend, "rolled back", index=spec.index, exercised=exercised)
    return {**base, "duration": seconds}


@settings(max_examples=60, deadline=None)
@given(cells=st.lists(st.tuples(st.sampled_from([0.0, 0.05, 0.2, 0.5]), st.sampled_from([0.3, 0.7, 1.0]),
                                st.floats(0.5, 8.0), st.sampled_from([Why.DECIDING, Why.FLIPPED,
                                                                      Why.DECIDING | Why.FLIPPED])),
                      min_size=1, max_size=6),
       workers=st.integers(1, 8), budget=st.floats(2.0, 300.0), seed=st.integers(0, 2**16))
def test_the_rounds_never_exceed_the_budget_and_a_deciding_cell_gets_no_trial_after_its_first_failure(
        cells, workers, budget, seed):
    """The rounds as the runner runs them (trial_round, a SettleGate over a Ledger, the executors' Dispatch), on a
    clock of their own: each cell's trials take its own seconds and fail or reach the lock at its own rates."""
    rng = random.Random(seed)
    backends = [f"b{i}" for i in range(len(cells))]
    how = dict(zip(backends, cells))
    clock = [0.0]
    planned = plan_of(backends, planned=1)
    ledger = Ledger([record(s, rng.random() < how[s.backend][0], rng.random() < how[s.backend][1],
                            how[s.backend][2]) for s in planned])
    templates = Templates.of(planned)
    targets = [SettleTarget.of("pause", "sigstop", b, how[b][3]) for b in backends]
    deadline = budget
    ends = []
    for _ in range(100):  # rounds
        open_cells = [t for t in targets if ledger.ended(t) is None]
        gate = SettleGate(open_cells, ledger, deadline, fallback_s=1.0, clock=lambda: clock[0])
        specs = trial_round([t for t in open_cells if gate.fits(t.cell)], ledger, templates)
        if not specs:
            break
        queue, in_flight = Dispatch([(s, 0) for s in specs], SessionBudget(1)), []
        while queue or in_flight:
            queue.drop(lambda spec: not gate.needed(spec))
            for spec, _ in queue.ready(workers - len(in_flight), later=gate.later):
                target = gate.targets[cell_of(spec)]
                if target.rule.stop_at_failure:
                    assert ledger.tally(target).failures == 0, "a deciding cell got a trial after its failure"
                heapq.heappush(in_flight, (clock[0] + how[spec.backend][2], spec.id, spec))
            if not in_flight:
                break
            clock[0], _, spec = heapq.heappop(in_flight)
            ends.append(clock[0])
            gate.kept(record(spec, rng.random() < how[spec.backend][0], rng.random() < how[spec.backend][1],
                             how[spec.backend][2]))
    assert all(end <= deadline + 1e-9 for end in ends)
    for target in targets:  # every cell either met its rule or had no time for one more trial
        assert ledger.ended(target) is not None or clock[0] + how[target.backend][2] > deadline - 1e-9


def test_an_added_event_past_the_deadline_is_dropped_and_one_in_time_runs_for_every_subject(tmp_path):
    """run_events with a SettleGate (the planted event scenario of test_shared_events.py, on no server): an event
    none of whose subjects the gate needs is dropped unrun; one it needs runs for the subjects it needs alone, their
    records kept in the ledger."""
    import io
    import threading

    from rich.console import Console
    from rich.progress import Progress, TextColumn

    from lab.records.results import RunFolder
    from lab.runner import Plan, RunContext
    from lab.runner.events import run_events
    from lab.runner.progress import ScenarioProgress
    from tests.fast.test_shared_events import PlantedEvent

    scenario = PlantedEvent()
    subjects = [TrialSpec("planted_event", b, "struck", 5) for b in ("session", "xact")]
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    for deadline, runs in ((0.0, 0), (1e12, 1)):
        scenario.runs = []
        folder = RunFolder.create(tmp_path / f"r{runs}", {"command": "planted"})
        ctx = RunContext(profile="default", plan=Plan([scenario], {scenario.name: subjects}), services=None,
                         monitor=None, writes=None, folder=folder, sampler=None, stop=threading.Event(), waves={},
                         progress=Progress(TextColumn(""), console=console, disable=True))
        ledger = Ledger()
        gate = SettleGate([SettleTarget.of("planted_event", "struck", "session", Why.DECIDING)], ledger, deadline,
                          fallback_s=1.0)
        shown = ScenarioProgress(console, ctx.progress, scenario.name, len(subjects), events=1)
        finished = run_events(ctx, scenario, shown, gate)
        assert len(scenario.runs) == runs and len(folder.trials()) == runs == len(finished.kept)
        assert [r["backend"] for r in ledger.all()] == ["session"] * runs  # xact, settled, was no subject


def test_the_settle_flags_refuse_in_one_line_what_would_settle_nothing(capsys):
    from lab.cli import main

    assert main(["run", "--previous", "some-run"]) == 2
    assert main(["run", "--settle-minutes", "0"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["lab: error: --previous names the references --settle compares marks with: add --settle",
                   "lab: error: --settle-minutes: give a positive number of minutes, not 0"]


def test_progress_names_each_open_cell_with_where_its_bound_stands_and_counts_the_cells_left():
    import io

    from rich.console import Console
    from rich.progress import Progress, TextColumn

    from lab.runner.settle_progress import SettleProgress

    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=300)
    ledger = Ledger([*kept("xact", 5), stale("etcd_fenced"), *kept("none", 3, exercised=False)])
    targets = [SettleTarget.of("pause", "sigstop", b, why)
               for b, why in (("xact", Why.DECIDING), ("etcd_fenced", Why.FLIPPED), ("none", Why.DECIDING))]
    shown = SettleProgress(console, Progress(TextColumn("{task.fields[left]}"), console=console, disable=True),
                           "pause", ledger)
    shown.begin_round(targets, 40)
    assert out.getvalue().splitlines() == [
        "pause: added round 1, 3 cells left (40 trials): none/sigstop ○ 0 of 3 exercised, "
        "xact/sigstop ≤45% (5 of 20 exercised), etcd_fenced/sigstop ✗ 1/1"]
    assert shown._left(0.0) == "3 cells left, weakest ○ 0 of 3 exercised"
    ledger.add([stale("none", index=3)])  # the deciding cell's first failure settles it
    assert shown._left(0.0) == "2 cells left, weakest ≤45% (5 of 20 exercised)"
