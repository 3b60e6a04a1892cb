"""The mutex linearizability search on planted histories: orders it must find, orders that cannot exist,
indeterminate ops that go either way, leases that lapse, and the bound."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from lab.checkers.linearizable import CHECKER, Linearization, check_mutex, mutex_finding, mutex_ops
from lab.checkers.ops import F, Op, Type
from lab.checkers.verdict import Kind, Valid

I, OK, FAIL, INFO = Type.INVOKE, Type.OK, Type.FAIL, Type.INFO
TTL = 2.0


def op(t, process, type_, f, **value):
    return Op(process, type_, f, t, value)


def grant(t, process):
    """An acquire asked 1 ms before it was granted at t."""
    return [op(t - 0.001, process, I, F.ACQUIRE), op(t, process, OK, F.ACQUIRE, scope="run")]


def release(t, process, type_=OK):
    return [op(t - 0.001, process, I, F.RELEASE), op(t, process, type_, F.RELEASE)]


def timed(history):
    """A planted history in time order, as the recorder gives it (a stable sort keeps equal times' order)."""
    return sorted(history, key=lambda o: o.time)


def assert_legal(history, result: Linearization):
    """The order replays on a mutex: each acquire finds it free, each release finds its process holding."""
    holder = None
    for i in result.order:
        o = history[i]
        if o.f is F.ACQUIRE:
            assert holder is None, (i, o)
            holder = o.process
        else:
            assert holder == o.process, (i, o)
            holder = None


# --- linearizable ------------------------------------------------------------------------------------------

def test_two_sequential_acquire_release_pairs_are_linearizable_in_their_order():
    history = [*grant(0.0, "a"), *release(1.0, "a"), *grant(2.0, "b"), *release(3.0, "b")]
    result = check_mutex(history)
    assert result.valid is Valid.TRUE
    assert result.order == (1, 3, 5, 7)  # each op by its completion
    assert result.explored >= 5


def test_two_overlapping_acquires_where_one_fails_are_linearizable_without_the_failed_one():
    history = timed([op(0.0, "a", I, F.ACQUIRE), op(0.1, "b", I, F.ACQUIRE), op(0.2, "b", OK, F.ACQUIRE),
                     op(0.3, "a", FAIL, F.ACQUIRE), *release(1.0, "b")])
    result = check_mutex(history)
    assert result.valid is Valid.TRUE
    assert [history[i].process for i in result.order] == ["b", "b"]
    assert_legal(history, result)


def test_overlapping_acquire_and_release_are_ordered_by_what_the_model_allows():
    """b asks before a's release completes and is granted after: only release-then-acquire is legal."""
    history = timed([*grant(0.0, "a"), op(1.0, "a", I, F.RELEASE), op(1.1, "b", I, F.ACQUIRE),
                     op(1.2, "b", OK, F.ACQUIRE), op(1.3, "a", OK, F.RELEASE)])
    result = check_mutex(history)
    assert result.valid is Valid.TRUE
    assert [(history[i].process, history[i].f) for i in result.order] == [
        ("a", F.ACQUIRE), ("a", F.RELEASE), ("b", F.ACQUIRE)]


# --- not linearizable, and the lease that makes it so ------------------------------------------------------

def lost_lock(contender_at):
    """The holder is granted at 0 and never releases; a contender is granted at contender_at."""
    return [*grant(0.0, "holder"), *grant(contender_at, "contender")]


def test_a_contender_granted_while_the_holder_never_released_is_not_linearizable():
    result = check_mutex(lost_lock(2.5))
    assert (result.valid, result.order) == (Valid.FALSE, ())
    assert result.detail == "contender's acquire at 2.500s while holder held since 0.000s"


def test_with_a_ttl_a_contender_asking_after_the_lease_lapsed_is_linearizable():
    history = lost_lock(TTL + 0.5)  # asked at 2.499 s, after the holder's invoke (-0.001 s) + TTL
    result = check_mutex(history, expires_after=TTL)
    assert result.valid is Valid.TRUE
    assert result.order == (1, 3)
    assert "holder's 2s lease lapsing" in result.detail
    assert check_mutex(history).valid is Valid.FALSE  # the same history, as a mutex, is broken


def test_with_a_ttl_a_contender_granted_before_the_lease_could_lapse_is_not_linearizable():
    result = check_mutex(lost_lock(TTL - 0.5), expires_after=TTL)
    assert result.valid is Valid.FALSE
    assert "could not lapse before 1.999s" in result.detail


def test_a_contender_asking_before_the_lapse_but_granted_after_it_is_linearizable():
    """The grant took effect somewhere in [invoke, ok]: a late enough instant is after the lapse."""
    history = [*grant(0.0, "holder"), op(1.5, "contender", I, F.ACQUIRE), op(2.5, "contender", OK, F.ACQUIRE)]
    assert check_mutex(history, expires_after=TTL).valid is Valid.TRUE


def test_a_release_reported_after_the_lease_went_to_another_is_not_linearizable_even_as_a_lease():
    """A lapsed lease explains the contender's grant, not the holder's release of it afterwards."""
    history = [*grant(0.0, "holder"), *grant(3.0, "contender"), *release(4.0, "holder")]
    result = check_mutex(history, expires_after=TTL)
    assert result.valid is Valid.FALSE
    assert result.detail.startswith("holder's release at 4.000s while contender held since 3.000s")


# --- indeterminate operations ------------------------------------------------------------------------------

def test_an_indeterminate_release_may_have_freed_the_lock_for_a_later_contender():
    history = [*grant(0.0, "holder"), *release(1.0, "holder", INFO), *grant(2.0, "contender")]
    result = check_mutex(history)
    assert result.valid is Valid.TRUE
    assert [history[i].f for i in result.order] == [F.ACQUIRE, F.RELEASE, F.ACQUIRE]
    assert_legal(history, result)


def test_a_contender_granted_before_the_indeterminate_release_was_asked_is_not_linearizable():
    history = [*grant(0.0, "holder"), *grant(2.0, "contender"), *release(3.0, "holder", INFO)]
    result = check_mutex(history)
    assert result.valid is Valid.FALSE
    assert result.detail == "contender's acquire at 2.000s while holder held since 0.000s"


def test_an_acquire_that_never_completed_may_be_left_out():
    """A killed process's acquire: invoked, never answered; the lock stayed free for the next."""
    history = [op(0.0, "killed", I, F.ACQUIRE), *grant(1.0, "next"), *release(2.0, "next")]
    result = check_mutex(history)
    assert result.valid is Valid.TRUE
    assert 0 not in result.order


def test_an_indeterminate_acquire_may_have_taken_effect():
    """Its ok release needs it to have happened: the search orders it in, by its invoke's index."""
    history = [op(0.0, "a", I, F.ACQUIRE), op(0.5, "a", INFO, F.ACQUIRE), *release(1.0, "a")]
    result = check_mutex(history)
    assert (result.valid, result.order) == (Valid.TRUE, (1, 3))


# --- what counts as a mutex operation ----------------------------------------------------------------------

def test_company_locks_are_not_run_level_mutex_ops():
    """Overlapping locks inside writes are judged by their writes, not by this model."""
    history = [op(0.0, "a", I, F.ACQUIRE), op(0.1, "a", OK, F.ACQUIRE, scope="company", company=1),
               op(0.2, "b", OK, F.ACQUIRE, scope="company", company=1),
               op(0.3, "a", I, F.WRITE, company=1), op(0.4, "a", OK, F.WRITE, company=1)]
    assert mutex_ops(history) == []
    result = check_mutex(history)
    assert (result.valid, result.order) == (Valid.UNKNOWN, ())  # nothing of the model's to order: no answer


def test_a_grant_recorded_without_its_invoke_counts_as_invoked_at_its_own_time():
    history = [op(0.0, "r0", OK, F.ACQUIRE, token=1), op(1.5, "r1", I, F.ACQUIRE), op(1.6, "r1", OK, F.ACQUIRE)]
    (alone, _) = mutex_ops(history)
    assert (alone.low, alone.high, alone.required) == (0.0, 0.0, True)
    assert check_mutex(history).valid is Valid.FALSE


# --- the bound ---------------------------------------------------------------------------------------------

def many_indeterminate(n=12):
    """n processes each acquire and release with neither answered, then two ok grants with no release between:
    no order exists, but proving it means trying the indeterminate ops' subsets."""
    history = []
    for k in range(n):
        history += [op(0.0, f"p{k}", I, F.ACQUIRE), op(0.01, f"p{k}", INFO, F.ACQUIRE),
                    op(0.02, f"p{k}", I, F.RELEASE), op(0.03, f"p{k}", INFO, F.RELEASE)]
    return timed([*history, *grant(1.0, "x"), *grant(2.0, "y")])


def test_the_state_bound_gives_unknown():
    result = check_mutex(many_indeterminate(), max_states=50)
    assert (result.valid, result.order, result.explored) == (Valid.UNKNOWN, (), 50)
    assert "bound reached" in result.detail


def test_the_time_bound_gives_unknown():
    assert check_mutex(many_indeterminate(), max_seconds=0.0).valid is Valid.UNKNOWN


def test_below_the_bound_the_same_search_finishes_false():
    result = check_mutex(many_indeterminate(4))
    assert result.valid is Valid.FALSE
    assert result.explored > 50


def test_two_hundred_ops_with_few_concurrent_finish_quickly():
    """50 hand-overs, each a contender asking before the holder's release and granted after it; every 10th
    hand-over's last release is indeterminate. 200 mutex ops, at most two at once."""
    history = []
    for k in range(50):
        t, holder, other = 10.0 * k, f"p{k % 3}", f"q{k % 3}"
        history += [*grant(t + 1.0, holder), op(t + 2.5, other, I, F.ACQUIRE), *release(t + 3.0, holder),
                    op(t + 3.5, other, OK, F.ACQUIRE), *release(t + 5.0, other, INFO if k % 10 == 9 else OK)]
    history = timed(history)
    assert len(mutex_ops(history)) == 200
    started = time.monotonic()
    result = check_mutex(history)
    assert time.monotonic() - started < 1.0
    assert result.valid is Valid.TRUE
    assert len(result.order) == 199  # the last op, an indeterminate release nothing needs, is left out
    assert result.explored <= 400  # near one state per op: real-time order leaves few candidates
    assert_legal(history, result)


# --- as one of judge()'s findings ------------------------------------------------------------------------

def test_the_finding_of_a_lost_lock_is_lost_with_its_proof():
    """The timing scenario's shape (judged 'lost' by the exclusion checker): the same answer here."""
    history = [op(0.0, "long", I, F.ACQUIRE), op(0.01, "long", OK, F.ACQUIRE, scope="run"),
               op(5.0, "short-1", I, F.ACQUIRE), op(5.01, "short-1", FAIL, F.ACQUIRE),
               op(10.2, "short-2", I, F.ACQUIRE), op(10.21, "short-2", OK, F.ACQUIRE, scope="run")]
    finding = mutex_finding(history)
    assert (finding.checker, finding.valid, finding.kind, finding.proof) == (CHECKER, Valid.FALSE, Kind.LOST, (1, 5))
    as_lease = mutex_finding(history, expires_after=10.0)
    assert (as_lease.valid, as_lease.kind) == (Valid.TRUE, None)


def test_the_finding_at_the_bound_is_unknown_without_a_kind():
    finding = mutex_finding(many_indeterminate(), max_states=10)
    assert (finding.valid, finding.kind) == (Valid.UNKNOWN, None)


# --- properties ----------------------------------------------------------------------------------------

PROCESSES = ["p0", "p1", "p2", "p3"]
steps = st.lists(st.tuples(st.sampled_from(PROCESSES), st.booleans()), min_size=1, max_size=30)


def correct_mutex(plan):
    """A sequential history of a correct mutex that only grants when free: each step 1 s apart, answered in
    0.1 s; a step with lost=True had its answer lost (info) though it took effect. Returns the history and
    the holds whose grant was answered: (grant time, when the holder asked to release, or None)."""
    history, holds, holder, t = [], [], None, 0.0
    for process, lost in plan:
        answer = INFO if lost else OK
        if holder == process:
            history += [op(t, process, I, F.RELEASE), op(t + 0.1, process, answer, F.RELEASE)]
            holder = None
            if holds and holds[-1][1] is None and holds[-1][2] == process:
                holds[-1] = (holds[-1][0], t, process)
        elif holder is None:
            history += [op(t, process, I, F.ACQUIRE), op(t + 0.1, process, answer, F.ACQUIRE, scope="run")]
            holder = process
            if not lost:
                holds.append((t + 0.1, None, process))
        else:
            history += [op(t, process, I, F.ACQUIRE), op(t + 0.1, process, FAIL, F.ACQUIRE)]
        t += 1.0
    return history, holds


@given(steps)
def test_a_correct_mutex_is_always_linearizable(plan):
    history, _ = correct_mutex(plan)
    result = check_mutex(history)
    assert result.valid is Valid.TRUE
    assert_legal(history, result)


@given(steps, st.floats(0.05, 10.0))
def test_a_correct_mutex_is_linearizable_as_a_lease_of_any_ttl(plan, ttl):
    history, _ = correct_mutex(plan)
    assert check_mutex(history, expires_after=ttl).valid is Valid.TRUE


@given(steps, st.data())
def test_one_grant_to_another_while_held_makes_it_not_linearizable(plan, data):
    history, holds = correct_mutex([(PROCESSES[0], False), *plan])  # the first step is an answered grant
    # An indeterminate release has no upper bound, so one the holder asked earlier could explain the extra
    # grant (see the test below): intrude only on a hold whose process has none before it.
    clean = [h for h in holds if not any(o.process == h[2] and o.f is F.RELEASE and o.type is INFO
                                         and o.time < h[0] for o in history)]
    granted, _, holder = data.draw(st.sampled_from(clean))
    intruder = data.draw(st.sampled_from([p for p in [*PROCESSES, "intruder"] if p != holder]))
    # Asked and granted strictly inside the hold: after its grant, before its holder asked to release.
    extra = [op(granted + 0.2, intruder, I, F.ACQUIRE), op(granted + 0.3, intruder, OK, F.ACQUIRE, scope="run")]
    result = check_mutex(timed([*history, *extra]))
    assert result.valid is Valid.FALSE
    assert result.detail.startswith(f"{intruder}'s acquire at ")


def test_an_indeterminate_release_may_land_after_its_process_acquires_again():
    """Jepsen's reading of info: no upper bound, even past the same process's next op (the old connection's
    command may reach the server after the new one's), so it can explain a later double grant."""
    history = [*grant(0.0, "p"), *release(0.5, "p"), op(1.0, "p", I, F.ACQUIRE), op(1.1, "p", INFO, F.ACQUIRE),
               *release(1.5, "p", INFO), *grant(2.0, "p"), *grant(3.0, "q")]
    result = check_mutex(history)
    assert result.valid is Valid.TRUE
    assert [history[i].time for i in result.order] == [0.0, 0.5, 2.0, 1.5, 3.0]  # the info acquire left out


# --- the lab's histories: locks inside the write, and holders that hear of their loss (issue 43) -------------

def in_write(t, process):
    """A lock inside the write: acquire() only says 'go on' (scope company), the company lock comes in the write,
    and release() at the end has nothing of the model's to release."""
    return [op(t, process, I, F.ACQUIRE), op(t + 0.001, process, OK, F.ACQUIRE, scope="company"),
            op(t + 0.01, process, OK, F.ACQUIRE, scope="company", company=1),
            op(t + 0.5, process, I, F.RELEASE), op(t + 0.501, process, OK, F.RELEASE)]


def test_locks_inside_the_write_with_their_releases_are_no_mutex_operations():
    """The releases were once kept while their acquires were left out, so 301 safe histories of the reference
    read 'not linearizable'. Two runs of a lock inside the write, overlapping: nothing for the model."""
    history = timed([*in_write(0.0, "holder"), *in_write(0.2, "contender")])
    assert mutex_ops(history) == []
    assert check_mutex(history).valid is Valid.UNKNOWN


def test_a_holder_told_of_its_loss_before_another_is_granted_is_a_mutex():
    history = timed([*grant(0.0, "holder"), op(1.0, "holder", OK, F.TOLD, how="exception"), *grant(2.0, "contender"),
                     *release(3.0, "holder", FAIL)])
    assert check_mutex(history).valid is Valid.TRUE


def test_a_grant_while_the_holder_still_believed_it_held_is_no_mutex_and_judge_calls_it_lost():
    from lab.checkers.judge import judge

    history = timed([*grant(0.0, "holder"), *grant(2.0, "contender"), op(3.0, "holder", OK, F.TOLD, how="held")])
    finding = mutex_finding(history)
    assert (finding.valid, finding.kind) == (Valid.FALSE, Kind.LOST) and finding.proof
    verdict = judge(history, None, 250)
    assert verdict.kind is Kind.LOST and verdict.lock is Valid.FALSE


def test_a_failed_release_ends_the_hold_where_the_holder_asked():
    """The holder asked to release and heard the lock was gone: it no longer believed it held from then on."""
    history = timed([*grant(0.0, "holder"), *release(1.0, "holder", FAIL), *grant(2.0, "contender")])
    assert check_mutex(history).valid is Valid.TRUE


def test_a_holder_warned_then_releasing_normally_is_a_mutex():
    """kazoo's SUSPENDED is a told: the holder's belief ends there, and its session may still resume. Its release
    that succeeds later, with nobody else granted meanwhile, is no violation (a trial of the reference read it so)."""
    history = timed([*grant(0.0, "holder"), op(0.3, "holder", OK, F.TOLD, how="callback", text="SUSPENDED"),
                     *refused(1.9, "contender"), *release(3.8, "holder")])
    assert check_mutex(history).valid is Valid.TRUE


def refused(t, process):
    return [op(t - 0.001, process, I, F.ACQUIRE), op(t, process, FAIL, F.ACQUIRE)]


# --- nothing to order: unknown, never "linearizable" (issue 56) -----------------------------------------------

def test_a_history_with_nothing_to_order_is_unknown():
    """671 trials of the reference (locks inside the write, no lock at all) were called linearizable with no
    run-level acquire or release in them: the search has nothing to order there, so it says unknown."""
    for history in (timed([*in_write(0.0, "holder"), *in_write(0.2, "contender")]),
                    [op(0.0, "r0", I, F.WRITE, company=1), op(0.1, "r0", OK, F.WRITE, company=1)], []):
        result = check_mutex(history)
        assert (result.valid, result.order, result.detail) == (
            Valid.UNKNOWN, (), "no run-level acquire or release to order")
        assert check_mutex(history, expires_after=TTL).valid is Valid.UNKNOWN
        finding = mutex_finding(history)
        assert (finding.valid, finding.kind, finding.proof) == (Valid.UNKNOWN, None, ())


def test_a_real_overlap_of_run_level_holds_beside_locks_inside_the_write_is_still_found():
    """The in-write locks add nothing to order; the two run-level holds that overlap are still no mutex."""
    history = timed([*in_write(0.0, "writer"), *grant(1.0, "holder"), *grant(2.0, "contender"),
                     *release(3.0, "holder"), *release(4.0, "contender")])
    finding = mutex_finding(history)
    assert (finding.valid, finding.kind) == (Valid.FALSE, Kind.LOST) and finding.proof


def test_unknown_evidence_never_changes_a_verdicts_kind_safety_or_answers():
    """judge() composes the search's findings with the rest: where the search has nothing to order, its unknown
    findings leave the kind, the safety, the lock's exclusion and the three answers as the other checkers say."""
    from lab.checkers.judge import judge, linearizability
    from lab.checkers.verdict import answers

    clean = timed([*in_write(0.0, "holder"), op(0.1, "holder", I, F.WRITE, company=1),
                   op(0.2, "holder", OK, F.WRITE, company=1)])
    merged = timed([op(0.0, "a", I, F.WRITE, company=1), op(0.1, "b", I, F.WRITE, company=1),
                    op(0.2, "a", OK, F.WRITE, company=1), op(0.3, "b", OK, F.WRITE, company=1)])
    for history, final, exclusion in ((clean, {1: {"rows": 250, "runs": ["holder"]}}, True),
                                      (merged, {1: {"rows": 500, "runs": ["a", "b"]}}, False),
                                      (merged, None, False)):
        verdict = judge(history, final, 250, exclusion, lease_ttl=TTL)
        evidence = linearizability(history, TTL)
        assert [f.valid for f in evidence] == [Valid.UNKNOWN, Valid.UNKNOWN]
        assert all(f in verdict.findings for f in evidence)
        assert set(verdict.figures["linearizable"].values()) == {"unknown"}
        rest = tuple(f for f in verdict.findings if f not in evidence)
        assert verdict.answers == answers(verdict.kind, rest)
        assert verdict.lock is (Valid.FALSE if any(f.valid is Valid.FALSE and f.kind in (Kind.LOST, Kind.OVERLAPPING_WRITES)
                                                   for f in rest) else Valid.TRUE)


# --- where the report cites it (lab/report/linearizability.py) ---------------------------------------------

def _record(id_, history, lock_lost_by=None):
    """A judged trial's record; lock_lost_by: plant the search's finding (or the exclusion checker's) as false
    where the other says true, a disagreement the report must name."""
    from dataclasses import replace

    from lab.checkers import ops as history_ops
    from lab.checkers.judge import judge
    from lab.checkers.verdict import Verdict

    verdict = judge(history, None, 250)
    if lock_lost_by is not None:
        flipped = tuple(replace(f, valid=Valid.FALSE, kind=Kind.LOST) if f.checker == lock_lost_by else f
                        for f in verdict.findings)
        verdict = Verdict(verdict.kind, verdict.lock, verdict.exercised, flipped, verdict.figures)
    return {"id": id_, "scenario": "two_runs", "backend": "planted", "variant": "-", "index": 0, "status": "ok",
            "schema": 2, "verdict": "planted", "judgement": verdict.to_json(), "history": history_ops.to_json(history),
            "measures": {}}


def test_the_report_says_what_the_search_ordered_found_and_that_it_agreed_with_exclusion():
    from lab.report.linearizability import section_linearizability, tally
    from lab.report.sections import RunView

    lost = timed([*grant(0.0, "holder"), *grant(2.0, "contender"), op(3.0, "holder", OK, F.TOLD, how="held")])
    kept = [*grant(0.0, "a"), *release(1.0, "a"), *grant(2.0, "b"), *release(3.0, "b")]
    inside = timed([*in_write(0.0, "holder"), *in_write(0.2, "contender")])
    records = [_record("t/lost/0", lost), _record("t/kept/0", kept), _record("t/inside/0", inside)]
    found = tally(records)
    assert (found.judged, found.ordered, found.not_linearizable, found.nothing_to_order, found.disagreed) == (
        3, 2, 1, 1, [])
    text = section_linearizability(RunView.of(records))
    assert ("Of 3 trials judged here, it ordered 2 and found 1 not linearizable; it agreed with the exclusion "
            "checker in every one of them.") in text
    assert "1 trial had no run-level acquire or release to order" in text


def test_a_planted_disagreement_with_the_exclusion_checker_is_named_never_smoothed_over():
    """Either way round: the search finds no mutex where exclusion found none lost, or exclusion finds a lost lock
    where the search found an order. The page names both trials instead of claiming agreement."""
    from lab.report.linearizability import section_linearizability
    from lab.report.sections import RunView

    kept = [*grant(0.0, "a"), *release(1.0, "a"), *grant(2.0, "b"), *release(3.0, "b")]
    text = section_linearizability(RunView.of([_record("t/search/0", kept, lock_lost_by=CHECKER),
                                               _record("t/exclusion/0", kept, lock_lost_by="exclusion"),
                                               _record("t/fine/0", kept)]))
    assert "agreed with the exclusion checker in every one" not in text
    assert ("it ordered 3 and found 1 not linearizable; ⚑ it disagreed with the exclusion checker in 2 of them, "
            "where the worse answer decides: `t/search/0`, `t/exclusion/0`") in text
