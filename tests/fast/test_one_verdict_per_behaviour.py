"""One behaviour, planted in the history shape of every scenario that can show it, gets one verdict.

Each shape is built the way its scenario builds it: the two-run, pooler and kill-point shapes as the
operations run_job records (lab/workload/job.py), the lease-fault shape (pause, cut,
restart, failover) from a holder process's reported events through scenarios._lease_faults.lease_history,
and the timing, calibrate and cases shapes as the operations those scenarios record. All are judged by
lab/checkers/judge.py, so a column can no longer word or mark the same thing its own way.
"""

from __future__ import annotations

import pytest

from lab.checkers.judge import judge
from lab.checkers.ops import F, Op, Recorder, Type
from lab.checkers.outcomes import Safety
from lab.checkers.verdict import Kind
from lab.checkers.words import verdict_text
from scenarios._lease_faults import lease_history

SIZE = 250


def said(t, event, **fields):
    """One event a holder process reports (lab/holder/process.py), at absolute monotonic time t."""
    return {"t": t, "run": "holder", "event": event, **fields}


def op(t, process, type_, f, **value):
    return Op(process, type_, f, t, value)


def in_time(history):
    """A history as a Recorder gives it: in time order, a stable sort."""
    return sorted(history, key=lambda o: o.time)


def contender_of(history) -> Recorder:
    """The contender's run_job operations on the trial's Recorder, its zero at 100 s."""
    contender = Recorder(100.0)
    contender.extend(history)
    return contender


def lease_shape(holder_events, contender_ops, fault="pause", in_transaction=False):
    """A lease-fault trial's history: the holder process's events (absolute monotonic times, here from 100 s),
    the contender's run_job operations, the fault struck at 100.2 s and healed at 103 s."""
    return lease_history(holder_events, contender_of(contender_ops), 1, "company" if in_transaction else "run",
                         fault, 100.2, 103.0)


def write_ops(t, run, refused=False):
    """run_job's write of company 1: begun, COMMIT sent, committed (or refused by the fence)."""
    done = op(t + 0.06, run, Type.FAIL, F.WRITE, company=1, fenced=True) if refused else \
        op(t + 0.06, run, Type.OK, F.WRITE, company=1)
    return [op(t, run, Type.INVOKE, F.WRITE, company=1), op(t + 0.05, run, Type.INVOKE, F.COMMIT, company=1), done]


def two_run_ops(run1, run2, grants=True):
    """Two runs of run_job on one company; with grants, each first gets its run-level right (else acquire()
    only says "go on": a lock inside the write, or none)."""
    out = []
    for run, t in ((run1, 0.0), (run2, 0.1)):
        out += [op(t, run, Type.INVOKE, F.ACQUIRE),
                op(t + 0.001, run, Type.OK, F.ACQUIRE, scope="run" if grants else "company")]
    return out


# --- 1. two concurrent runs with no lock ---------------------------------------------------------------

def no_lock_overlap():
    return in_time([*two_run_ops("run1", "run2", grants=False), *write_ops(0.2, "run1"),
                        *write_ops(0.21, "run2")])


def no_lock_pooler():
    # The pooler's two runs are run_job's as well: the same events, through PgBouncer.
    return no_lock_overlap()


def no_lock_killpoints():
    return in_time([*two_run_ops("r0", "r1", grants=False), *write_ops(0.2, "r0"),
                        op(0.22, "injector", Type.OK, F.FAULT, kind="stall", point="after_delete", struck=True),
                        *write_ops(0.21, "r1"), op(0.4, "observer", Type.OK, F.OBSERVE, company=1, count=500)])


@pytest.mark.parametrize("shape", [no_lock_overlap, no_lock_pooler, no_lock_killpoints])
def test_two_runs_without_a_lock_merge_in_every_shape(shape):
    v = judge(shape(), {1: {"rows": 500, "runs": ["a", "b"]}}, SIZE, promises_exclusion=False)
    assert (v.kind, v.safety, v.exercised, verdict_text(v)) == (Kind.MERGED, Safety.UNSAFE, True, "merged (500 rows)")


# --- 2. a holder superseded who then commits, and 3. the same write refused by the fence -------------------

def superseded_pause(refused=False):
    outcome = {"outcome": "rejected", "error": "FenceRejected"} if refused else {"outcome": "committed"}
    holder = [said(100.0, "acquire", granted=True, token=1), said(100.1, "at_point"), said(103.1, "resumed"),
              said(103.3, "write", **outcome)]
    contender = [op(2.4, "contender", Type.INVOKE, F.ACQUIRE),
                 op(2.5, "contender", Type.OK, F.ACQUIRE, token=2, scope="run"),
                 *write_ops(2.6, "contender")]
    return lease_shape(holder, contender)


def superseded_cut(refused=False):
    history = superseded_pause(refused)
    return [Op(o.process, o.type, o.f, o.time, {**o.value, "name": "cut"} if o.f in (F.FAULT, F.HEAL) else o.value)
            for o in history]


def superseded_killpoints(refused=False):
    return in_time([op(0.0, "r0", Type.OK, F.ACQUIRE, token=1, scope="run"),
                        op(0.1, "injector", Type.OK, F.FAULT, kind="stall", point="after_acquire", struck=True),
                        op(1.5, "r1", Type.INVOKE, F.ACQUIRE),
                        op(1.6, "r1", Type.OK, F.ACQUIRE, token=2, scope="run"),
                        *write_ops(1.7, "r1"), op(2.6, "injector", Type.OK, F.HEAL, kind="stall"),
                        *write_ops(2.7, "r0", refused)])


def superseded_pooler(refused=False):
    # Transaction pooling lent run1's lock session: run2 was granted while run1 held, then run1 wrote.
    return in_time([*two_run_ops("run1", "run2"), *write_ops(0.3, "run2"), *write_ops(0.5, "run1", refused)])


SUPERSEDED = [superseded_pause, superseded_cut, superseded_killpoints, superseded_pooler]


@pytest.mark.parametrize("shape", SUPERSEDED)
def test_a_superseded_holder_that_commits_is_a_stale_write_accepted_in_every_shape(shape):
    v = judge(shape(), {1: {"rows": 250, "runs": ["holder"]}}, SIZE)
    assert (v.kind, v.safety, v.lock.value, v.exercised) == (Kind.STALE_WRITE_ACCEPTED, Safety.UNSAFE, "false", True)
    assert verdict_text(v) == "stale write accepted"


@pytest.mark.parametrize("shape", SUPERSEDED)
def test_a_superseded_holder_refused_by_the_fence_keeps_the_company_in_every_shape(shape):
    v = judge(shape(refused=True), {1: {"rows": 250, "runs": ["contender"]}}, SIZE)
    assert (v.kind, v.safety, v.exercised, verdict_text(v)) == (Kind.STALE_WRITE_REJECTED, Safety.SAFE, True,
                                                                "stale write rejected")


# --- 4. a holder that never writes -----------------------------------------------------------------------

def never_writes_timing():
    return [op(0.0, "long", Type.INVOKE, F.ACQUIRE), op(0.01, "long", Type.OK, F.ACQUIRE, scope="run"),
            op(5.0, "short-1", Type.INVOKE, F.ACQUIRE), op(5.01, "short-1", Type.FAIL, F.ACQUIRE),
            op(10.2, "short-2", Type.INVOKE, F.ACQUIRE), op(10.21, "short-2", Type.OK, F.ACQUIRE, scope="run")]


def never_writes_calibrate():
    return [op(0.0, "holder", Type.INVOKE, F.ACQUIRE), op(0.01, "holder", Type.OK, F.ACQUIRE, scope="run"),
            op(1.95, "poller", Type.INVOKE, F.ACQUIRE), op(1.951, "poller", Type.FAIL, F.ACQUIRE),
            op(2.0, "fault", Type.OK, F.FAULT, name="terminate"),
            op(2.0, "poller", Type.INVOKE, F.ACQUIRE), op(2.004, "poller", Type.OK, F.ACQUIRE, scope="run")]


def never_writes_cases():
    return [op(0.0, "holder", Type.INVOKE, F.ACQUIRE), op(0.01, "holder", Type.OK, F.ACQUIRE, scope="run"),
            op(1.0, "probe-1", Type.INVOKE, F.ACQUIRE), op(1.01, "probe-1", Type.FAIL, F.ACQUIRE),
            op(5.0, "probe-2", Type.INVOKE, F.ACQUIRE), op(5.01, "probe-2", Type.OK, F.ACQUIRE, scope="run"),
            op(5.02, "probe-2", Type.INVOKE, F.RELEASE), op(5.03, "probe-2", Type.OK, F.RELEASE),
            op(5.1, "holder", Type.OK, F.HELD, held=False)]


@pytest.mark.parametrize("shape", [never_writes_timing, never_writes_calibrate, never_writes_cases])
@pytest.mark.parametrize("fenced", [False, True])
def test_a_holder_that_never_writes_loses_the_lock_and_nothing_more_is_claimed(shape, fenced):
    """Fenced or not: with no write after the loss, no fence was asked, so the verdict is the lock's alone."""
    v = judge(shape(), {}, SIZE)
    assert (v.kind, v.safety, v.lock.value, v.exercised, verdict_text(v)) == (Kind.LOST, Safety.UNTESTED, "false",
                                                                             True, "lost")


# --- the linearizability search as evidence: a lease behaving as a lease, or a broken one --------------------

def test_a_lock_lost_to_its_ttl_is_no_mutex_but_is_a_lease():
    v = judge(never_writes_timing(), {}, SIZE, lease_ttl=10.0)
    assert v.figures["linearizable"] == {"linearizable (mutex)": "false", "linearizable (lease, TTL 10 s)": "true"}
    assert v.kind is Kind.LOST  # the evidence never changes what the checkers decided


def test_a_second_grant_before_the_first_lease_could_lapse_is_not_even_a_lease():
    """Kleppmann's Redlock case: a restarted master forgets the key and grants it while the lease is valid."""
    v = judge(never_writes_timing(), {}, SIZE, lease_ttl=30.0)
    assert v.figures["linearizable"]["linearizable (lease, TTL 30 s)"] == "false"


def test_a_paused_holder_with_no_lock_has_no_right_to_lose():
    """`none` under a pause: its write rolls back with the guard, the contender rebuilds; nothing lapsed."""
    holder = [said(100.0, "acquire", granted=True), said(100.1, "at_point"), said(103.1, "resumed"),
              said(103.3, "write", outcome="failed")]
    contender = [op(2.4, "contender", Type.INVOKE, F.ACQUIRE),
                 op(2.5, "contender", Type.OK, F.ACQUIRE, scope="company"),
                 *write_ops(2.6, "contender")]
    history = lease_history(holder, contender_of(contender), 1, None, "pause", 100.2, 103.0)
    v = judge(history, {1: {"rows": 250, "runs": ["contender"]}}, SIZE, promises_exclusion=False)
    assert (v.kind, v.safety, v.exercised) == (Kind.INTACT, Safety.SAFE, True)
