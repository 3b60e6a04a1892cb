"""The one checker set on planted histories: each violation it must catch, and clean histories that pass."""

from __future__ import annotations

import pytest

from lab.checkers.judge import judge
from lab.checkers.ops import F, Op, Type
from lab.checkers.outcomes import Safety
from lab.checkers.verdict import Kind, Valid, Verdict
from lab.checkers.words import verdict_text

I, OK, FAIL, INFO = Type.INVOKE, Type.OK, Type.FAIL, Type.INFO
SIZE = 250
WHOLE = {1: {"rows": 250, "runs": ["run1"]}}


def op(t, process, type_, f, **value):
    return Op(process, type_, f, t, value)


def grant(t, process, token=None):
    return [op(t - 0.001, process, I, F.ACQUIRE), op(t, process, OK, F.ACQUIRE, scope="run", token=token)]


def refused(t, process):
    return [op(t - 0.001, process, I, F.ACQUIRE), op(t, process, FAIL, F.ACQUIRE)]


def write(t_begin, t_commit, process, outcome=OK, **value):
    """A company's write: begun, COMMIT asked, then its completion."""
    return [op(t_begin, process, I, F.WRITE, company=1), op(t_commit, process, I, F.COMMIT, company=1),
            op(t_commit + 0.01, process, outcome, F.WRITE, company=1, **value)]


def locked_write(t_lock, t_commit, process, outcome=OK, **value):
    """A write whose lock lives inside it: its company lock comes right after its first statement."""
    return [op(t_lock - 0.001, process, I, F.WRITE, company=1),
            op(t_lock, process, OK, F.ACQUIRE, scope="company", company=1),
            *([op(t_commit, process, I, F.COMMIT, company=1)] if outcome is OK else []),
            op(t_commit + 0.01, process, outcome, F.WRITE, company=1, **value)]


def judged(history, final=WHOLE, exclusion=True) -> Verdict:
    return judge(sorted(history, key=lambda o: o.time), final, SIZE, exclusion)


def test_two_runs_without_a_lock_merge_the_company():
    v = judged([*write(0.1, 0.5, "run1"), *write(0.2, 0.6, "run2")],
               {1: {"rows": 500, "runs": ["run1", "run2"]}}, exclusion=False)
    assert (v.kind, v.safety, v.exercised) == (Kind.MERGED, Safety.UNSAFE, True)
    assert verdict_text(v) == "merged (500 rows)"


def test_a_superseded_holder_that_commits_is_a_stale_write_accepted():
    v = judged([*grant(0.0, "holder"), op(0.1, "fault", OK, F.FAULT, name="pause"), *grant(2.4, "contender"),
                *write(2.5, 2.6, "contender"), op(3.5, "fault", OK, F.HEAL), *write(3.6, 3.7, "holder")],
               {1: {"rows": 250, "runs": ["holder"]}})
    assert (v.kind, v.safety, v.lock, v.exercised) == (Kind.STALE_WRITE_ACCEPTED, Safety.UNSAFE, Valid.FALSE, True)
    assert v.proof  # the operations that prove it


def test_a_fence_that_refuses_the_superseded_holder_keeps_the_company():
    v = judged([*grant(0.0, "holder", token=1), *grant(2.4, "contender", token=2), *write(2.5, 2.6, "contender"),
                *write(3.6, 3.7, "holder", outcome=FAIL, fenced=True)], {1: {"rows": 250, "runs": ["contender"]}})
    assert (v.kind, v.safety, v.lock, v.exercised) == (Kind.STALE_WRITE_REJECTED, Safety.SAFE, Valid.FALSE, True)


def test_a_lost_lock_with_no_write_after_it_is_lost_and_untested():
    v = judged([*grant(0.0, "holder"), *refused(5.0, "short-1"), *grant(10.2, "short-2")], final=None)
    assert (v.kind, v.safety, v.lock, v.exercised) == (Kind.LOST, Safety.UNTESTED, Valid.FALSE, True)


def test_a_lock_inside_the_write_rolls_back_with_its_transaction():
    history = [op(0.0, "holder", I, F.ACQUIRE), op(0.0, "holder", OK, F.ACQUIRE, scope="company"),
               *locked_write(0.1, 3.6, "holder", outcome=FAIL, error="server closed the connection"),
               op(0.2, "fault", OK, F.FAULT, name="pause"), *locked_write(2.4, 2.6, "contender")]
    v = judged(history, {1: {"rows": 250, "runs": ["contender"]}})
    assert (v.kind, v.safety, v.lock, v.exercised) == (Kind.ROLLED_BACK, Safety.SAFE, Valid.TRUE, True)


def test_a_refused_second_run_held_and_was_not_exercised():
    v = judged([*grant(0.0, "run1"), *refused(0.3, "run2"), *write(0.1, 0.8, "run1"),
                op(0.9, "run1", I, F.RELEASE), op(0.91, "run1", OK, F.RELEASE)])
    assert (v.kind, v.safety, v.exercised) == (Kind.HELD, Safety.SAFE, False)


def test_a_second_run_that_waited_on_the_lock_inside_the_write_is_intact_and_not_exercised():
    """run2 asked while run1 held and got the lock only once run1 had committed: the lock worked, but nothing took
    its right away, so the trial does not count as exercised (the brief's rule: another process granted or
    committed while the holder still believed it held)."""
    history = [*locked_write(0.1, 0.8, "run1"), op(0.3, "run2", I, F.WRITE, company=1),
               op(0.82, "run2", OK, F.ACQUIRE, scope="company", company=1),
               op(1.2, "run2", I, F.COMMIT, company=1), op(1.21, "run2", OK, F.WRITE, company=1)]
    v = judged(history, {1: {"rows": 250, "runs": ["run2"]}})
    assert (v.kind, v.exercised, verdict_text(v)) == (Kind.INTACT, False, "intact (250 rows)")


def test_the_holders_own_failed_write_with_nobody_else_in_is_not_exercised():
    """Patroni's synchronous_mode case: the holder's commit fails with the primary it was on, and no other process is
    ever granted or commits: the right was not taken away by anyone, so the rollback is not a ✓ (issue 43)."""
    history = [*locked_write(0.1, 3.0, "holder", outcome=FAIL, error="server closed the connection"),
               op(0.5, "fault", OK, F.FAULT, name="agent_paused"), *refused(2.6, "contender")]
    v = judged(history, {1: {"rows": 250, "runs": ["seed"]}})
    assert (v.kind, v.exercised) == (Kind.ROLLED_BACK, False)


def test_a_waiter_granted_before_the_killed_holder_hears_is_exercised():
    """The post's kill test: the holder's session is ended after its delete; the waiter gets the lock as the server
    rolls the holder back, before the holder's next statement tells it so."""
    history = [*locked_write(0.1, 2.0, "holder", outcome=FAIL, error="terminating connection"),
               op(0.3, "contender", I, F.WRITE, company=1), op(1.0, "fault", OK, F.FAULT, name="terminate"),
               op(1.01, "contender", OK, F.ACQUIRE, scope="company", company=1),
               op(1.2, "contender", I, F.COMMIT, company=1), op(1.21, "contender", OK, F.WRITE, company=1)]
    v = judged(history, {1: {"rows": 250, "runs": ["contender"]}})
    assert (v.kind, v.exercised) == (Kind.ROLLED_BACK, True)


def test_an_unknown_commit_after_a_loss_is_indeterminate():
    v = judged([*grant(0.0, "holder"), *grant(2.4, "contender"), *write(2.5, 2.6, "contender"),
                *write(3.6, 3.7, "holder", outcome=INFO, resolved="unknown")])
    assert (v.kind, v.safety) == (Kind.INDETERMINATE, Safety.UNKNOWN)


def test_an_unknown_commit_resolved_as_landed_counts_as_a_stale_write():
    v = judged([*grant(0.0, "holder"), *grant(2.4, "contender"), *write(2.5, 2.6, "contender"),
                *write(3.6, 3.7, "holder", outcome=INFO, resolved="committed")])
    assert v.kind is Kind.STALE_WRITE_ACCEPTED


def test_an_observer_that_saw_a_half_written_company_is_torn():
    v = judged([*grant(0.0, "run1"), *write(0.1, 0.8, "run1"), op(0.05, "observer", OK, F.OBSERVE, company=1, count=250),
                op(0.3, "observer", OK, F.OBSERVE, company=1, count=0)])
    assert (v.kind, verdict_text(v)) == (Kind.TORN, "torn (saw [0])")


def test_a_release_that_reports_success_for_a_taken_lock_is_a_false_release():
    v = judged([*grant(0.0, "holder"), *grant(1.0, "contender"), op(2.0, "holder", I, F.RELEASE),
                op(2.01, "holder", OK, F.RELEASE)], final=None)
    assert v.kind is Kind.FALSE_RELEASE


def test_a_killed_run_does_not_believe_it_holds():
    history = [*grant(0.0, "r0"), op(0.1, "r0", I, F.WRITE, company=1),
               op(0.2, "injector", OK, F.FAULT, kind="kill", kills="r0"), *grant(0.3, "r1"), *write(0.4, 0.6, "r1")]
    v = judged(history, {1: {"rows": 250, "runs": ["r1"]}})
    assert (v.kind, v.lock) == (Kind.INTACT, Valid.TRUE)


def test_a_holder_told_before_the_contender_got_in_still_writes_stale():
    """Hearing the loss ends the holder's belief (the lock is not two-held), but a write after it still lands."""
    history = [*grant(0.0, "holder"), op(1.0, "holder", OK, F.TOLD, how="exception"), *grant(2.0, "contender"),
               *write(2.1, 2.2, "contender"), *write(3.0, 3.1, "holder")]
    v = judged(history)
    assert (v.kind, v.lock) == (Kind.STALE_WRITE_ACCEPTED, Valid.TRUE)


def test_without_a_promise_of_exclusion_only_the_company_is_judged():
    """An idempotent upsert: two overlapping commits, one whole company."""
    v = judged([*write(0.1, 0.5, "run1"), *write(0.2, 0.6, "run2")], {1: {"rows": 250, "runs": ["run2"]}},
               exclusion=False)
    assert (v.kind, v.safety) == (Kind.INTACT, Safety.SAFE)


def test_overlapping_committed_writes_where_exclusion_was_promised():
    v = judged([*locked_write(0.1, 0.5, "run1"), *locked_write(0.2, 0.6, "run2")],
               {1: {"rows": 250, "runs": ["run2"]}})
    assert v.lock is Valid.FALSE and v.safety is Safety.UNSAFE
    assert any(f.kind is Kind.OVERLAPPING_WRITES and f.valid is Valid.FALSE for f in v.findings)


@pytest.mark.parametrize("kind", list(Kind))
def test_every_kind_has_words_and_a_safety(kind):
    v = Verdict(kind, Valid.TRUE, True)
    assert verdict_text(v) and v.safety in Safety


def test_a_verdict_survives_json():
    v = judged([*grant(0.0, "holder"), *grant(2.4, "contender"), *write(2.5, 2.6, "contender"),
                *write(3.6, 3.7, "holder")])
    again = Verdict.from_json(v.to_json())
    assert (again.kind, again.lock, again.exercised, again.proof) == (v.kind, v.lock, v.exercised, v.proof)


def test_detection_is_read_from_the_pollers_operations():
    from lab.checkers.judge import detection

    def polls(*pairs):  # (start, ok?) after a kill at 2.0 s
        out = [op(2.0, "fault", OK, F.FAULT, name="terminate")]
        for start, got in pairs:
            out += [op(start, "poller", I, F.ACQUIRE), op(start + 0.001, "poller", OK if got else FAIL, F.ACQUIRE)]
        return sorted(out, key=lambda o: o.time)

    assert detection(polls((1.98, False), (2.03, True)), "poller", 0.05) == "within one poll"
    assert detection(polls((2.06, False), (2.11, True)), "poller", 0.05) == "late"  # still held a poll after
    assert detection(polls((2.03, False), (2.08, False)), "poller", 0.05) == "not detected"
    assert detection(polls((2.03, True))[1:], "poller", 0.05) is None  # no fault struck
