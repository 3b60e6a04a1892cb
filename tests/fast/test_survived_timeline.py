"""The lock judged on the history that survived, two holders judged on the history as acknowledged (issue 55).

Planted: the routed Patroni split brain of the reference run 478b, operation for operation (`xact`, trial
patroni/xact/agent_paused_routed/0): the holder's transaction opens on node0, Patroni promotes node1, the
contender (routed to node1) takes the company and commits, the holder commits on node0 and is told ok, node0 is
rewound, the company is the contender's 250 rows. The holder's commit is the store's loss, not a stale write: the
lock's answer (survived) is yes, the store's no; two holders believed they held at once (acknowledged). The same
history with the company left torn is a failure on every timeline.
"""

from __future__ import annotations

from dataclasses import replace

from lab.checkers.judge import judge
from lab.checkers.ops import F, Op, Type
from lab.checkers.verdict import Kind, Question, Timeline, Valid, Verdict, answers_of

I, OK = Type.INVOKE, Type.OK
SIZE = 250


def op(t, process, type_, f, **value):
    return Op(process, type_, f, t, value)


ROUTED_SPLIT_BRAIN = [  # the recorded history, times as recorded
    op(21.6665, "holder", I, F.ACQUIRE),
    op(23.4409, "holder", I, F.WRITE, company=7),
    op(23.4409, "holder", OK, F.ACQUIRE, company=7, scope="company"),
    op(24.4528, "fault", OK, F.FAULT, name="patroni_agent_pause", forked=True),
    op(46.9413, "contender", I, F.ACQUIRE),
    op(46.9413, "contender", OK, F.ACQUIRE, scope="company"),
    op(47.0324, "contender", I, F.WRITE, company=7),
    op(47.0602, "contender", OK, F.ACQUIRE, company=7, scope="company"),
    op(47.2121, "contender", I, F.COMMIT, company=7),
    op(47.2155, "contender", OK, F.WRITE, company=7),
    op(47.2157, "contender", I, F.RELEASE),
    op(47.2157, "contender", OK, F.RELEASE),
    op(50.555, "holder", I, F.COMMIT, company=7),
    op(50.6037, "holder", OK, F.WRITE, company=7),
    op(50.6117, "holder", I, F.RELEASE),
    op(50.6117, "holder", OK, F.RELEASE),
    op(51.5878, "fault", OK, F.HEAL, name="patroni_agent_pause"),
]
CONTENDERS_ROWS = {7: {"rows": SIZE, "runs": ["contender"]}}


def test_a_discarded_commit_is_the_stores_loss_not_a_stale_write():
    verdict = judge(ROUTED_SPLIT_BRAIN, CONTENDERS_ROWS, SIZE)
    assert verdict.kind is Kind.ACKNOWLEDGED_WRITE_LOST
    assert verdict.answers == {Question.LOCK: Valid.TRUE, Question.COMPANY: Valid.TRUE, Question.STORE: Valid.FALSE}
    assert verdict.exercised is True
    # Judged on what survived: no stale write, no overlap, each finding says so.
    survived = {f.checker: f for f in verdict.findings if f.timeline is Timeline.SURVIVED}
    assert survived["stale write"].valid is Valid.TRUE and survived["overlapping writes"].valid is Valid.TRUE


def test_two_holders_believed_they_held_at_once_as_they_were_told():
    verdict = judge(ROUTED_SPLIT_BRAIN, CONTENDERS_ROWS, SIZE)
    assert verdict.lock is Valid.FALSE
    told = {f.checker: f for f in verdict.findings if f.timeline is Timeline.ACKNOWLEDGED}
    assert told["stale write"].kind is Kind.STALE_WRITE_ACCEPTED and told["stale write"].valid is Valid.FALSE


def test_the_record_keeps_both_timelines_and_reads_back():
    verdict = judge(ROUTED_SPLIT_BRAIN, CONTENDERS_ROWS, SIZE)
    data = verdict.to_json()
    assert {f.get("timeline") for f in data["findings"]} >= {"survived", "acknowledged"}
    assert Verdict.from_json(data).findings == verdict.findings
    assert answers_of(data)[Question.LOCK] is Valid.TRUE


def test_the_same_split_brain_with_the_company_torn_fails_the_company():
    merged = {7: {"rows": 2 * SIZE, "runs": ["contender", "holder"]}}
    verdict = judge(ROUTED_SPLIT_BRAIN, merged, SIZE)
    assert verdict.answers[Question.COMPANY] is Valid.FALSE
    assert verdict.kind is Kind.STALE_WRITE_ACCEPTED  # both writes are in the table: nothing was discarded


CONCURRENT_COMMITS = [  # the new reference's patroni/xact/agent_paused_routed/1: both COMMITs asked 6 ms apart
    op(48.9288, "holder", I, F.ACQUIRE),
    op(52.7961, "holder", I, F.WRITE, company=7),
    op(52.7961, "holder", OK, F.ACQUIRE, company=7, scope="company"),
    op(56.0173, "fault", OK, F.FAULT, name="patroni_agent_pause", forked=True),
    op(82.4438, "contender", I, F.ACQUIRE),
    op(82.4438, "contender", OK, F.ACQUIRE, scope="company"),
    op(86.2784, "contender", I, F.WRITE, company=7),
    op(86.8881, "contender", OK, F.ACQUIRE, company=7, scope="company"),
    op(88.9202, "contender", I, F.COMMIT, company=7),
    op(88.9261, "holder", I, F.COMMIT, company=7),
    op(89.059, "contender", OK, F.WRITE, company=7),
    op(89.3483, "holder", OK, F.WRITE, company=7),
    op(92.7671, "fault", OK, F.HEAL, name="patroni_agent_pause"),
]


def test_where_the_store_forked_a_write_absent_from_the_survivor_is_out_of_the_survived_timeline():
    """Two primaries took both commits a few milliseconds apart and the company ends with the contender's rows: the
    history cannot tell whether the holder's write was replaced or thrown away with the losing primary, so it is
    not judged stale in what survived; two holders still believed they held at once."""
    verdict = judge(CONCURRENT_COMMITS, CONTENDERS_ROWS, SIZE)
    assert verdict.answers == {Question.LOCK: Valid.TRUE, Question.COMPANY: Valid.TRUE, Question.STORE: Valid.TRUE}
    assert verdict.lock is Valid.FALSE


def test_on_one_store_a_replaced_stale_write_is_still_a_stale_write():
    """The same operations with no fork confirmed: the holder's commit after the contender had the company is a stale
    write, whoever's rows the company ends with."""
    one_store = [replace(o, value={"name": "pause"}) if o.f is F.FAULT else o for o in CONCURRENT_COMMITS]
    verdict = judge(one_store, CONTENDERS_ROWS, SIZE)
    assert verdict.answers[Question.LOCK] is Valid.FALSE and verdict.kind is Kind.STALE_WRITE_ACCEPTED


def test_where_the_holders_primary_survived_its_write_is_not_stale_there():
    """The same split brain with the old primary's history kept instead (the holder's rows at the end): the
    contender's write went with the other primary, and in what survived the holder wrote alone."""
    holders_rows = {7: {"rows": SIZE, "runs": ["holder"]}}
    verdict = judge(ROUTED_SPLIT_BRAIN, holders_rows, SIZE)
    assert verdict.answers[Question.LOCK] is Valid.TRUE and verdict.lock is Valid.FALSE


def test_without_a_fork_or_a_discard_the_two_timelines_are_one():
    """On one store (no fork confirmed) with the holder's rows at the end: the holder's commit after the contender
    had the company is a stale write, and every finding judged the one history."""
    one_store = [replace(o, value={"name": "pause"}) if o.f is F.FAULT else o for o in ROUTED_SPLIT_BRAIN]
    verdict = judge(one_store, {7: {"rows": SIZE, "runs": ["holder"]}}, SIZE)
    assert verdict.answers[Question.LOCK] is Valid.FALSE and verdict.kind is Kind.STALE_WRITE_ACCEPTED
    assert not [f for f in verdict.findings if f.timeline is not None]
