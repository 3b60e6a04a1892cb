"""The decision (issue 55): each need decided on the harm it cares about, every candidate on the same evidence, the
lab's limits never the lock's n/a, the qualifiers ranked by stated rules. Each test plants the cells that must move a
lock in or out of a recommendation and sees it move; the split-brain ones plant trials judged by the real checkers
from the reference run's recorded history (tests/fast/test_survived_timeline.py)."""

from __future__ import annotations

from lab.checkers.judge import judge
from lab.checkers.outcomes import Safety
from lab.checkers.words import verdict_text
from lab.decision.cells import Mark
from lab.decision.compare import Rule
from lab.decision.harm import Harm
from lab.decision.needs import NEEDS
from lab.report.decide import decision_of, section_comparison, section_decide
from lab.report.matrix import matrix_rows
from lab.report.sections import RunView
from tests.fast.planted import trial
from tests.fast.test_survived_timeline import CONTENDERS_ROWS, ROUTED_SPLIT_BRAIN, SIZE

PG_WRITES, MARIADB_WRITES, RUN_LEVEL, OUTSIDE, SERVICE = NEEDS
META = {
    "backend_order": ["none", "xact", "etcd_fenced", "session_autocommit"],
    "capabilities": {"none": [], "xact": ["exclusion", "in_transaction"],
                     "etcd_fenced": ["exclusion", "fencing", "lease_expiry"],
                     "session_autocommit": ["exclusion", "session_lock"]},
    "lock_service": {"none": "postgres", "xact": "postgres", "etcd_fenced": "etcd", "session_autocommit": "postgres"},
    "where": {"none": {"lock": "postgres", "writes": "postgres", "fence": None},
              "xact": {"lock": "postgres", "writes": "postgres", "fence": None},
              "etcd_fenced": {"lock": "etcd", "writes": "postgres", "fence": "postgres"},
              "session_autocommit": {"lock": "postgres", "writes": "postgres", "fence": None}},
    "post_roles": {"none": "no_lock", "xact": "method_4", "session_autocommit": "method_3"},
    "faults": {
        "pause": {"title": "pause", "columns": [{"variant": "sigstop", "label": "holder paused", "order": 1,
                                                 "legend": "SIGSTOP", "strikes": None}]},
        "patroni": {"title": "Patroni", "columns": [{"variant": "agent_paused", "label": "split brain", "order": 2,
                                                     "legend": "agent SIGSTOP", "strikes": ["postgres"]}]},
    },
}


def kept(scenario, variant, backend, kind, n=3, **extra):
    return [trial(scenario, variant, backend, kind, index=i, **extra) for i in range(n)]


GOOD = [*kept("pause", "sigstop", "none", "intact"), *kept("pause", "sigstop", "xact", "rolled back"),
        *kept("pause", "sigstop", "etcd_fenced", "stale write rejected"),
        *kept("pause", "sigstop", "session_autocommit", "held", exercised=False)]


def judged(backend: str, history, final, index=0) -> dict:
    """A trial record of the routed split brain, judged by the real checkers as a run records it."""
    verdict = judge(history, final, SIZE)
    return {"id": f"patroni/{backend}/agent_paused/{index}", "scenario": "patroni", "backend": backend,
            "variant": "agent_paused", "index": index, "status": "ok", "verdict": verdict_text(verdict),
            "safety": verdict.safety.value, "exercised": verdict.exercised, "schema": 2,
            "judgement": verdict.to_json(), "measures": {}}


def split_brain(final) -> list[dict]:
    """The control and xact ran the routed split brain the same way (the reference's trials); etcd_fenced's lock in
    etcd was never touched."""
    return [judged("none", ROUTED_SPLIT_BRAIN, final), judged("xact", ROUTED_SPLIT_BRAIN, final),
            trial("patroni", "agent_paused", "etcd_fenced", "held", exercised=False)]


def cells(trials, backend, harm=Harm.SURVIVING_COMPANY):
    return {c.label: c.cell for b, row in matrix_rows(RunView.of(trials, META), harm) if b == backend for c in row}


def test_a_discarded_commit_is_the_stores_for_database_writes_and_two_holders_for_writes_outside():
    trials = GOOD + split_brain(CONTENDERS_ROWS)
    assert cells(trials, "xact")["split brain"].mark is Mark.STORE
    assert cells(trials, "none")["split brain"].mark is Mark.CONTROL  # the control row is never ✓ or ✗
    assert cells(trials, "xact", Harm.TWO_HOLDERS)["split brain"].mark is Mark.FAILED
    assert "two holders at once" in cells(trials, "xact", Harm.TWO_HOLDERS)["split brain"].text
    decision = decision_of(RunView.of(trials, META))
    assert "xact" not in {a.backend for a in decision.avoid}
    assert "xact" in {s.backend for s in decision.answer_for(PG_WRITES).ranked}


def test_the_same_split_brain_with_the_surviving_company_torn_fails_every_need():
    merged = {7: {"rows": 2 * SIZE, "runs": ["contender", "holder"]}}
    trials = GOOD + split_brain(merged)
    for harm in Harm:
        assert cells(trials, "xact", harm)["split brain"].mark is Mark.FAILED
    decision = decision_of(RunView.of(trials, META))
    assert "xact" not in {s.backend for s in decision.answer_for(PG_WRITES).ranked}
    assert decision.answer_for(PG_WRITES).ruled_out["xact"] == "split brain"


def test_a_lock_out_of_the_faults_reach_is_unaffected_and_answers_a_rivals_failure():
    """etcd_fenced's lock lives in etcd; the split brain strikes PostgreSQL: its ○ there is *unaffected*, by its
    declaration and its trials, and answers the fault that failed a rival."""
    merged = {7: {"rows": 2 * SIZE, "runs": ["contender", "holder"]}}
    trials = GOOD + split_brain(merged)
    cell = cells(trials, "etcd_fenced")["split brain"]
    assert cell.mark is Mark.UNAFFECTED and "its lock lives in etcd" in cell.text
    answer = decision_of(RunView.of(trials, META)).answer_for(PG_WRITES)
    assert answer.choice == "etcd_fenced"


def test_a_right_the_column_declares_it_cannot_take_is_unaffected_where_its_trials_agree():
    """A transaction pooler reaches a lock inside the write (its lock lives in PostgreSQL behind the pooler) but keeps
    each transaction on one server session: the column declares it cannot take that right, and a ○ there whose trials
    kept the company whole reads *unaffected* with the reason, answering the pooler's failure of a session lock."""
    meta = {**META, "faults": {**META["faults"], "pooler": {"title": "pooler", "columns": [
        {"variant": "transaction_mode", "label": "through a transaction pooler", "order": 3, "legend": "PgBouncer",
         "strikes": ["postgres"], "cannot_take": ["in_transaction"],
         "cannot_take_why": "a pooler keeps each transaction on one server session"}]}}}
    trials = GOOD + [
        *kept("pooler", "transaction_mode", "none", "intact"),
        *kept("pooler", "transaction_mode", "xact", "intact", exercised=False),
        trial("pooler", "transaction_mode", "session_autocommit", "stale write accepted", lock="false")]
    cell = {c.label: c.cell for b, row in matrix_rows(RunView.of(trials, meta)) if b == "xact"
            for c in row}["through a transaction pooler"]
    assert cell.mark is Mark.UNAFFECTED and "keeps each transaction on one server session" in cell.text
    answer = decision_of(RunView.of(trials, meta)).answer_for(PG_WRITES)
    assert answer.comparison.unproven("xact") == [] and answer.choice == "xact"
    # The same ○ for a session lock the column does not declare: it proves nothing.
    held = [*kept("pooler", "transaction_mode", "session_autocommit", "held", exercised=False)]
    cell = {c.label: c.cell for b, row in matrix_rows(RunView.of(GOOD + held, meta)) if b == "session_autocommit"
            for c in row}["through a transaction pooler"]
    assert cell.mark is Mark.NOT_EXERCISED


def test_a_not_exercised_cell_under_a_fault_that_failed_a_rival_is_unproven_without_a_reason():
    """The same ○ with the lock's service among those the column strikes (no reason it cannot be reached): it proves
    nothing, so the lock is unproven there and does not qualify."""
    meta = {**META, "where": {**META["where"], "etcd_fenced": {"lock": "postgres", "writes": "postgres",
                                                                 "fence": "postgres"}}}
    merged = {7: {"rows": 2 * SIZE, "runs": ["contender", "holder"]}}
    trials = GOOD + split_brain(merged)
    run = RunView.of(trials, meta)
    answer = decision_of(run).answer_for(PG_WRITES)
    assert answer.comparison.unproven("etcd_fenced") == ["split brain"]
    assert answer.choice is None
    assert "unproven under *split brain*" in section_decide(run)
    assert "unproven under *split brain*, which failed another candidate" in section_comparison(run)


def test_a_lab_limit_renders_not_run_and_leaves_the_lock_unproven():
    """A combination the lab cannot run is *not run* (unknown), never n/a: it cannot answer a rival's failure. The
    same cell n/a by declaration does."""
    failed = [trial("patroni", "agent_paused", "xact", "stale write accepted", lock="false",
                    findings=(("stale write", "stale write accepted"),))]
    not_run = {"id": "patroni/etcd_fenced/agent_paused/0", "scenario": "patroni", "backend": "etcd_fenced",
               "variant": "agent_paused", "index": 0, "status": "skipped", "skip": "not run", "runs_here": False,
               "reason": "not run: the lab could not"}
    run = RunView.of(GOOD + failed + [not_run], META)
    assert cells(GOOD + failed + [not_run], "etcd_fenced")["split brain"].mark is Mark.NOT_RUN
    answer = decision_of(run).answer_for(PG_WRITES)
    assert answer.choice is None and answer.comparison.unproven("etcd_fenced") == ["split brain"]
    immune = {**not_run, "skip": "n/a", "runs_here": True, "reason": "its lock, fence and writes are elsewhere"}
    assert decision_of(RunView.of(GOOD + failed + [immune], META)).answer_for(PG_WRITES).choice == "etcd_fenced"


def test_two_holders_is_the_harm_for_writes_outside_the_database():
    """A fenced lease whose holder was paused past its TTL kept the company whole (the fence refused the write): ✓
    for the database's needs, ✗ for writes outside it, where no fence can be checked."""
    trials = GOOD[:6] + kept("pause", "sigstop", "etcd_fenced", "stale write rejected", lock="false") + GOOD[9:]
    assert cells(trials, "etcd_fenced")["holder paused"].mark is Mark.KEPT
    assert cells(trials, "etcd_fenced", Harm.TWO_HOLDERS)["holder paused"].mark is Mark.FAILED
    decision = decision_of(RunView.of(trials, META))
    assert decision.answer_for(OUTSIDE).ruled_out["etcd_fenced"] == "holder paused"
    assert "etcd_fenced" in {s.backend for s in decision.answer_for(RUN_LEVEL).ranked}


def test_fewest_services_ranks_first_and_the_page_says_what_separates_the_runner_up():
    trials = GOOD + kept("patroni", "agent_paused", "none", "intact") + kept(
        "patroni", "agent_paused", "xact", "rolled back") + kept("patroni", "agent_paused", "etcd_fenced",
                                                                 "stale write rejected")
    run = RunView.of(trials, META)
    answer = decision_of(run).answer_for(PG_WRITES)
    assert (answer.choice, answer.runner_up, answer.rule) == ("xact", "etcd_fenced", Rule.SERVICES)
    text = section_decide(run)
    assert "`etcd_fenced`: it needs 2 services (etcd, postgres) against 1 (postgres)" in text


def test_the_weakest_deciding_cell_is_named_with_its_n_and_bound_and_what_would_make_it_strong():
    one = [*kept("pause", "sigstop", "none", "intact", 1), *kept("pause", "sigstop", "xact", "rolled back", 1)]
    run = RunView.of(one, META)
    answer = decision_of(run).answer_for(PG_WRITES)
    assert answer.choice == "xact" and answer.weakest[0] == "holder paused"
    text = section_decide(run)
    assert "*holder paused*, n=1, ≤95%, weak" in text
    assert "a failure under *holder paused* (✓ n=1, ≤95%; strong after 19 more clean trials)" in text
    twenty = [*kept("pause", "sigstop", "none", "intact", 20), *kept("pause", "sigstop", "xact", "rolled back", 20)]
    text = section_decide(RunView.of(twenty, META))
    assert "*holder paused*, n=20, ≤14% |" in text and "every deciding ✓ is strong" in text


def test_a_failure_states_its_rate_with_its_interval():
    trials = GOOD + [*kept("patroni", "agent_paused", "xact", "rolled back", 16),
                     *[trial("patroni", "agent_paused", "xact", "stale write accepted", index=16 + i, lock="false")
                       for i in range(4)]]
    cell = cells(trials, "xact")["split brain"]
    assert cell.mark is Mark.FAILED and cell.failed == 4
    assert "rate 4/20 (95 %: 6–44 %)" in cell.text


def test_a_kill_point_search_counts_each_struck_schedule_as_a_trial():
    search = trial("pause", "sigstop", "xact", "held", exercised=True)
    search["measures"] = {"struck": 52}
    cell = cells([*kept("pause", "sigstop", "none", "intact"), search], "xact")["holder paused"]
    assert cell.mark is Mark.KEPT and cell.exercised == 52 and cell.strong


def test_safety_read_for_a_harm_never_reads_words():
    record = judged("xact", ROUTED_SPLIT_BRAIN, CONTENDERS_ROWS)
    record["verdict"] = "held"  # words that lie: the typed judgement decides
    assert record["safety"] == Safety.UNSAFE.value
    assert cells(GOOD + [record, judged("none", ROUTED_SPLIT_BRAIN, CONTENDERS_ROWS)], "xact")[
        "split brain"].mark is Mark.STORE
