"""The acknowledged-write checker: a commit that returned ok must be in the final state unless a later write replaced it.

Planted: a split brain's holder whose commit on the old primary returned ok and was rewound away (alone, and
behind a fence that accepted it), caught; clean and concurrent histories, passed; histories that cannot decide,
unknown and never a verdict of their own. A hypothesis property over serial histories: exactly the final states
other than the last write's are losses.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lab.checkers.judge import acknowledged_writes, facts_of, judge
from lab.checkers.ops import F, Op, Type
from lab.checkers.outcomes import Safety
from lab.checkers.verdict import Kind, Valid
from lab.checkers.words import verdict_text

I, OK, FAIL, INFO = Type.INVOKE, Type.OK, Type.FAIL, Type.INFO
SIZE = 250


def op(t, process, type_, f, **value):
    return Op(process, type_, f, t, value)


def grant(t, process, token=None):
    return [op(t - 0.001, process, I, F.ACQUIRE), op(t, process, OK, F.ACQUIRE, scope="run", token=token)]


def write(t_begin, t_commit, process, outcome=OK, **value):
    """A company's write: begun, COMMIT asked, then its completion."""
    return [op(t_begin, process, I, F.WRITE, company=1), op(t_commit, process, I, F.COMMIT, company=1),
            op(t_commit + 0.01, process, outcome, F.WRITE, company=1, **value)]


def final(*runs, rows=SIZE):
    return {1: {"rows": rows, "runs": list(runs)}}


def checked(history, at_end):
    history = sorted(history, key=lambda o: o.time)
    return acknowledged_writes(facts_of(history), at_end)


def judged(history, at_end, exclusion=True):
    return judge(sorted(history, key=lambda o: o.time), at_end, SIZE, exclusion)


# The split brain of the `patroni` scenario's agent_paused column, as its history records it: the contender asks
# the old primary (where the holder's lock still is) and is refused; the holder's commit there returns ok; the
# old primary is rewound and the company ends as the seed left it.
SPLIT_BRAIN = [*grant(1.58, "holder"), op(1.67, "fault", OK, F.FAULT, name="patroni_agent_pause"),
               op(23.65, "contender", I, F.ACQUIRE), op(26.55, "contender", FAIL, F.ACQUIRE),
               *write(26.56, 26.59, "holder"), op(26.61, "fault", OK, F.HEAL, name="patroni_agent_pause")]


def test_a_commit_rewound_away_after_a_split_brain_is_an_acknowledged_write_lost():
    finding = checked(SPLIT_BRAIN, final("seed"))
    assert (finding.valid, finding.kind) == (Valid.FALSE, Kind.ACKNOWLEDGED_WRITE_LOST)
    assert "holder" in finding.detail and "seed" in finding.detail
    v = judged(SPLIT_BRAIN, final("seed"))
    assert (v.kind, v.safety) == (Kind.ACKNOWLEDGED_WRITE_LOST, Safety.UNSAFE)
    assert verdict_text(v) == "acknowledged write lost"
    assert v.proof  # the holder's acknowledged write


def test_a_fence_on_a_primary_about_to_be_rewound_protects_nothing():
    # Routed by the REST health check, the contender takes the lease on the new primary (a higher token) and
    # rebuilds; the holder's write goes to the old primary, whose fence has seen no higher token, and commits.
    history = [*grant(1.0, "holder", token=1), op(1.1, "fault", OK, F.FAULT, name="patroni_agent_pause"),
               *grant(24.0, "contender", token=2), *write(24.1, 24.2, "contender"),
               *write(24.3, 24.4, "holder", token=1), op(24.5, "fault", OK, F.HEAL)]
    v = judged(history, final("contender"))
    assert (v.kind, v.safety) == (Kind.ACKNOWLEDGED_WRITE_LOST, Safety.UNSAFE)
    # The history alone calls the holder's write stale; the final state says it is not even there.
    assert any(f.kind is Kind.STALE_WRITE_ACCEPTED and f.valid is Valid.FALSE for f in v.findings)


def test_a_lock_inside_the_write_whose_commit_was_lost_is_caught_by_its_commit_time():
    # The holder began its write (and took its lock inside it) before the fault and asked COMMIT only after the
    # contender's write had ended: its commit cannot have been overwritten by it.
    history = [op(0.89, "holder", I, F.WRITE, company=1), op(0.89, "holder", OK, F.ACQUIRE, scope="company", company=1),
               op(0.93, "fault", OK, F.FAULT, name="patroni_agent_pause"),
               op(22.88, "contender", I, F.WRITE, company=1),
               op(22.90, "contender", OK, F.ACQUIRE, scope="company", company=1),
               op(22.902, "contender", I, F.COMMIT, company=1), op(22.906, "contender", OK, F.WRITE, company=1),
               op(22.908, "holder", I, F.COMMIT, company=1), op(22.919, "holder", OK, F.WRITE, company=1)]
    assert checked(history, final("contender")).kind is Kind.ACKNOWLEDGED_WRITE_LOST


def test_a_clean_history_keeps_every_acknowledged_write():
    history = [*grant(0.0, "holder"), *write(0.1, 0.2, "holder"), *grant(1.0, "contender"),
               *write(1.1, 1.2, "contender")]
    assert checked(history, final("contender")).valid is Valid.TRUE
    assert checked(SPLIT_BRAIN, final("holder")).valid is Valid.TRUE  # no failover: the holder's rows are there
    v = judged(history, final("contender"))
    assert v.kind is not Kind.ACKNOWLEDGED_WRITE_LOST


def test_a_write_the_final_one_may_have_followed_is_not_called_lost():
    # Concurrent commits (each asked before the other's ended): either order is possible, and the company holds
    # one of them.
    concurrent = [*write(0.1, 0.5, "run1"), *write(0.2, 0.505, "run2")]
    assert checked(concurrent, final("run2")).valid is Valid.TRUE
    assert checked(concurrent, final("run1")).valid is Valid.TRUE
    # A later write whose commit nobody knows the outcome of may have replaced it.
    unknown_later = [*write(0.1, 0.2, "run1"), op(1.0, "run2", I, F.WRITE, company=1),
                     op(1.1, "run2", I, F.COMMIT, company=1), op(1.2, "run2", INFO, F.WRITE, company=1, resolved="unknown")]
    assert checked(unknown_later, final("run2")).valid is Valid.TRUE


def test_only_commits_that_returned_ok_count():
    failed = [*write(0.1, 0.2, "holder", outcome=FAIL)]
    assert checked(failed, final("seed")).valid is Valid.TRUE
    rejected = [*write(0.1, 0.2, "holder", outcome=FAIL, fenced=True)]
    assert checked(rejected, final("seed")).valid is Valid.TRUE


def test_what_the_history_cannot_decide_is_unknown_and_leaves_the_verdict_alone():
    # The table was not read at the end.
    assert checked(SPLIT_BRAIN, {}).valid is Valid.UNKNOWN
    # The company holds rows of a run the history shows no write of.
    stranger = checked(SPLIT_BRAIN, final("somebody"))
    assert (stranger.valid, stranger.kind) == (Valid.UNKNOWN, None)
    # The holder wrote twice: its rows are there, but either write may be the one.
    twice = [*write(0.1, 0.2, "holder"), *write(1.1, 1.2, "holder")]
    assert checked(twice, final("holder")).valid is Valid.UNKNOWN
    v = judged(twice, final("holder"))
    assert v.kind is not Kind.ACKNOWLEDGED_WRITE_LOST and v.safety is Safety.SAFE


@given(st.integers(min_value=1, max_value=6), st.data())
def test_in_a_serial_history_exactly_a_final_state_other_than_the_last_writes_is_a_loss(n, data):
    """n acknowledged rebuilds one after another by distinct runs: the company must end with the last one's rows;
    ending with any earlier one's (or the seed's) loses the writes after it."""
    history = [o for i in range(n) for o in write(i + 0.1, i + 0.5, f"run{i}")]
    kept = data.draw(st.sampled_from(["seed", *(f"run{i}" for i in range(n))]))
    finding = checked(history, final(kept))
    if kept == f"run{n - 1}":
        assert finding.valid is Valid.TRUE
    else:
        assert (finding.valid, finding.kind) == (Valid.FALSE, Kind.ACKNOWLEDGED_WRITE_LOST)
