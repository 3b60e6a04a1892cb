"""The decision page charges each failure to what failed and compares candidates over the same faults (issue 43):
each test plants the cells that must move a lock in or out of a recommendation, and sees it move."""

from __future__ import annotations

from lab.report.decide import section_decide
from lab.report.matrix import Mark, matrix_rows
from lab.report.sections import RunView
from tests.fast.planted import trial

META = {
    "backend_order": ["none", "xact", "etcd_fenced"],
    "capabilities": {"none": [], "xact": ["exclusion", "in_transaction"],
                     "etcd_fenced": ["exclusion", "fencing", "lease_expiry"]},
    "lock_service": {"none": "postgres", "xact": "postgres", "etcd_fenced": "etcd"},
    "where": {"none": {"lock": "postgres", "writes": "postgres", "fence": None},
              "xact": {"lock": "postgres", "writes": "postgres", "fence": None},
              "etcd_fenced": {"lock": "etcd", "writes": "postgres", "fence": "postgres"}},
    "post_roles": {"none": "no_lock", "xact": "method_4"},
    "faults": {
        "pause": {"title": "pause", "columns": [{"variant": "sigstop", "label": "holder paused", "order": 1,
                                                 "legend": "SIGSTOP"}]},
        "patroni": {"title": "Patroni", "columns": [{"variant": "agent_paused", "label": "split brain", "order": 2,
                                                     "legend": "agent SIGSTOP"}]},
    },
}


def kept(scenario, variant, backend, kind, n=3):
    return [trial(scenario, variant, backend, kind, index=i) for i in range(n)]


LOST_ACK = (("acknowledged writes", "acknowledged write lost"),)
BOTH_IN = (("acknowledged writes", "acknowledged write lost"), ("stale write", "stale write accepted"),
           ("overlapping writes", "overlapping writes"))
GOOD = [*kept("pause", "sigstop", "none", "intact"), *kept("pause", "sigstop", "xact", "rolled back"),
        *kept("pause", "sigstop", "etcd_fenced", "stale write rejected")]


def split_brain(xact_exclusion_broken: bool) -> list[dict]:
    """The control and xact both lose an acknowledged write in a split brain; xact's lock holds, or not."""
    control = trial("patroni", "agent_paused", "none", "acknowledged write lost", findings=LOST_ACK)
    if xact_exclusion_broken:
        mine = trial("patroni", "agent_paused", "xact", "acknowledged write lost", lock="false", findings=BOTH_IN)
    else:
        mine = trial("patroni", "agent_paused", "xact", "acknowledged write lost", exercised=False, findings=LOST_ACK)
    fenced = trial("patroni", "agent_paused", "etcd_fenced", "held", exercised=False)
    return [control, mine, fenced]


def cells(trials, backend):
    return {c.label: c.cell for b, row in matrix_rows(RunView.of(trials, META)) if b == backend for c in row}


def test_a_store_loss_the_control_shares_is_the_stores_and_disqualifies_no_lock():
    trials = GOOD + split_brain(xact_exclusion_broken=False)
    assert cells(trials, "xact")["split brain"].mark is Mark.STORE
    assert cells(trials, "none")["split brain"].mark is Mark.CONTROL  # the control row is never ✓ or ✗
    text = section_decide(RunView.of(trials, META))
    assert "use `xact`" in text and "Do not use" not in text
    assert "the store lost acknowledged writes under *split brain* whatever the lock" in text


def test_the_same_loss_with_exclusion_broken_is_still_the_locks():
    trials = GOOD + split_brain(xact_exclusion_broken=True)
    assert cells(trials, "xact")["split brain"].mark is Mark.FAILED
    text = section_decide(RunView.of(trials, META))
    assert "use `xact`" not in text and "- *split brain*: `xact` (acknowledged write lost 1/1, the lock's exclusion broken too)." in text


def test_a_loss_the_control_did_not_suffer_is_not_charged_to_the_store():
    trials = GOOD + split_brain(xact_exclusion_broken=False)
    trials[-3] = trial("patroni", "agent_paused", "none", "intact")  # the control kept every acknowledged write
    assert cells(trials, "xact")["split brain"].mark is Mark.FAILED


def test_a_lock_cannot_qualify_by_never_facing_the_fault_that_failed_another():
    """etcd_fenced did not run under the fault that failed xact: unknown there, so it is unproven, not chosen. The
    same cell n/a by its declaration (the fault reaches none of its parts) would not hold it back."""
    failed = [trial("patroni", "agent_paused", "xact", "stale write accepted", lock="false",
                    findings=(("stale write", "stale write accepted"),))]
    not_run = {"id": "patroni/etcd_fenced/agent_paused/0", "scenario": "patroni", "backend": "etcd_fenced",
               "variant": "agent_paused", "index": 0, "status": "skipped", "skip": "not run", "runs_here": False,
               "reason": "not run: the lab could not"}
    text = section_decide(RunView.of(GOOD + failed + [not_run], META))
    assert "*For one writer per company, every write in PostgreSQL:* no lock measured here qualifies" in text
    assert "`etcd_fenced` is unproven: unknown under *split brain*, which failed another candidate." in text
    immune = {**not_run, "skip": "n/a", "runs_here": True, "reason": "its lock, fence and writes are elsewhere"}
    assert ("*For one writer per company, every write in PostgreSQL:* use `etcd_fenced`"
            in section_decide(RunView.of(GOOD + failed + [immune], META)))


def test_a_recommendation_on_a_one_trial_tick_says_it_is_weak():
    one = [*kept("pause", "sigstop", "none", "intact", 1), *kept("pause", "sigstop", "xact", "rolled back", 1)]
    text = section_decide(RunView.of(one, META))
    assert "use `xact`" in text and "its evidence is weak" in text and "n=1, ≤95%" in text
    three = [*kept("pause", "sigstop", "none", "intact"), *kept("pause", "sigstop", "xact", "rolled back")]
    text = section_decide(RunView.of(three, META))
    assert "use `xact`" in text and "its evidence is weak" not in text and "every ✓ strong" in text


def test_the_best_candidate_is_the_one_with_fewer_unknowns_whatever_the_names():
    """Over the same faults, a lock whose trials under one fault errored (unknown) ranks behind one that kept the
    company whole under it, though neither failed."""
    errored = {"id": "patroni/xact/agent_paused/0", "scenario": "patroni", "backend": "xact",
               "variant": "agent_paused", "index": 0, "status": "error", "reason": "broke"}
    trials = [*GOOD, *kept("patroni", "agent_paused", "etcd_fenced", "stale write rejected"), errored]
    text = section_decide(RunView.of(trials, META))
    assert "*For one writer per company, every write in PostgreSQL:* use `etcd_fenced`" in text
    assert "Also qualifying: `xact`" in text
