"""The checkers on kill-point histories: each planted violation is caught through the same judge every scenario
uses, and a clean history passes."""

from lab.checkers.judge import facts_of, false_releases, judge, overlapping_writes, stale_writes
from lab.checkers.ops import F, Type
from lab.checkers.outcomes import Safety
from lab.checkers.verdict import Kind, Valid
from tests.fast.test_one_verdict_per_behaviour import in_time, op


def judged(history, final=None, exclusion=True):
    return judge(in_time(history), final or {1: {"rows": 250, "runs": ["r1"]}}, 250, exclusion)


def facts(history):
    return facts_of(in_time(history))


def invalid(finding) -> bool:
    return finding.valid is Valid.FALSE


CLEAN = [
    op(0.00, "r0", Type.OK, F.ACQUIRE, token=1, scope="run"), op(0.01, "r0", Type.INVOKE, F.WRITE, company=1),
    op(0.02, "r0", Type.OK, F.WRITE, company=1), op(0.025, "r0", Type.INVOKE, F.RELEASE),
    op(0.03, "r0", Type.OK, F.RELEASE),
    op(0.04, "r1", Type.OK, F.ACQUIRE, token=2, scope="run"), op(0.05, "r1", Type.INVOKE, F.WRITE, company=1),
    op(0.06, "r1", Type.OK, F.WRITE, company=1), op(0.07, "r1", Type.OK, F.RELEASE),
    op(0.08, "observer", Type.OK, F.OBSERVE, company=1, count=250),
]


def test_a_clean_history_passes_every_check():
    v = judged(CLEAN)
    assert (v.kind, v.safety, v.lock) == (Kind.INTACT, Safety.SAFE, Valid.TRUE)
    assert not any(invalid(f) for f in v.findings)


# r0 is granted first, loses its right unknowingly; r1 is granted and rebuilds; r0's rebuild lands last.
STALE = [op(0.00, "r0", Type.OK, F.ACQUIRE, scope="run"), op(0.10, "r1", Type.OK, F.ACQUIRE, scope="run"),
         op(0.12, "r1", Type.OK, F.WRITE, company=1), op(0.20, "r0", Type.INVOKE, F.WRITE, company=1),
         op(0.25, "r0", Type.OK, F.WRITE, company=1)]


def test_an_older_grants_write_landing_after_a_newer_ones_is_stale():
    # The stale rebuild landed last, so the company holds its rows (r1's would mean r0's acknowledged write was lost).
    assert judged(STALE, {1: {"rows": 250, "runs": ["r0"]}}).kind is Kind.STALE_WRITE_ACCEPTED
    assert invalid(stale_writes(facts(STALE), storage_orders=False))


def test_a_fenced_write_refused_is_not_stale():
    refused = STALE[:3] + [op(0.25, "r0", Type.FAIL, F.WRITE, company=1, fenced=True)]
    v = judged(refused)
    assert (v.kind, v.safety, v.lock) == (Kind.STALE_WRITE_REJECTED, Safety.SAFE, Valid.FALSE)


def test_writes_in_grant_order_are_not_stale_even_if_the_first_commits_late():
    # The fence row made r1 wait for r0's transaction: r0 commits first, r1 overwrites it. No harm, although
    # the lock itself was two-held (r1 was granted while r0 still believed it held).
    ordered = [op(0.00, "r0", Type.OK, F.ACQUIRE, scope="run"),
               op(0.01, "r0", Type.OK, F.ACQUIRE, company=1, scope="company"),
               op(0.10, "r1", Type.OK, F.ACQUIRE, scope="run"), op(0.25, "r0", Type.OK, F.WRITE, company=1),
               op(0.26, "r1", Type.OK, F.ACQUIRE, company=1, scope="company"),
               op(0.30, "r1", Type.OK, F.WRITE, company=1)]
    v = judged(ordered)
    assert (v.kind, v.safety, v.lock) == (Kind.INTACT, Safety.SAFE, Valid.FALSE)


def test_company_locks_are_per_company():
    other_company = [op(0.00, "r0", Type.OK, F.ACQUIRE, company=1, scope="company"),
                     op(0.10, "r1", Type.OK, F.ACQUIRE, company=2, scope="company"),
                     op(0.15, "r1", Type.OK, F.WRITE, company=2), op(0.20, "r0", Type.OK, F.WRITE, company=1)]
    assert not invalid(stale_writes(facts(other_company), storage_orders=True))
    same_company = [op(0.00, "r0", Type.OK, F.ACQUIRE, company=1, scope="company"),
                    op(0.10, "r1", Type.OK, F.ACQUIRE, company=1, scope="company"),
                    op(0.15, "r1", Type.OK, F.WRITE, company=1), op(0.20, "r0", Type.OK, F.WRITE, company=1)]
    assert invalid(stale_writes(facts(same_company), storage_orders=True))


def test_overlapping_committed_writes_of_one_company_are_caught():
    planted = [op(0.0, "r0", Type.INVOKE, F.WRITE, company=1), op(0.1, "r1", Type.INVOKE, F.WRITE, company=1),
               op(0.2, "r0", Type.OK, F.WRITE, company=1), op(0.3, "r1", Type.OK, F.WRITE, company=1)]
    assert overlapping_writes(facts(planted)).kind is Kind.OVERLAPPING_WRITES and invalid(overlapping_writes(facts(planted)))
    assert not invalid(overlapping_writes(facts(CLEAN)))


def test_a_release_claiming_success_after_losing_the_lock_is_false():
    planted = [op(0.0, "r0", Type.OK, F.ACQUIRE, scope="run"), op(0.1, "r1", Type.OK, F.ACQUIRE, scope="run"),
               op(0.2, "r0", Type.OK, F.RELEASE)]
    assert judged(planted).kind is Kind.FALSE_RELEASE
    honest = planted[:2] + [op(0.2, "r0", Type.FAIL, F.RELEASE)]
    assert not invalid(false_releases(facts(honest)))


def test_torn_and_mixed_states_are_caught():
    torn = judged([op(0.0, "r0", Type.INVOKE, F.WRITE, company=1),
                   op(0.1, "observer", Type.OK, F.OBSERVE, company=1, count=0),
                   op(0.2, "r0", Type.OK, F.WRITE, company=1)])
    assert (torn.kind, torn.figures["seen"]) == (Kind.TORN, [0])
    assert judged(CLEAN, {1: {"rows": 500, "runs": ["r0", "r1"]}}).kind is Kind.MERGED


def test_backends_that_promise_nothing_are_held_to_the_data_checks_only():
    final = {1: {"rows": 250, "runs": ["r0"]}}
    assert judged(STALE, final, exclusion=False).safety is not Safety.UNSAFE
    assert judged(STALE, final, exclusion=True).safety is Safety.UNSAFE


def test_a_waiter_granted_by_a_commit_recorded_late_is_not_an_overlap():
    # r0's thread records its commit after r1, which that commit unblocked, records its lock.
    late_record = [op(0.00, "r0", Type.OK, F.ACQUIRE, company=1, scope="company"),
                   op(0.50, "r0", Type.INVOKE, F.COMMIT, company=1),
                   op(0.51, "r1", Type.OK, F.ACQUIRE, company=1, scope="company"),
                   op(0.512, "r0", Type.OK, F.WRITE, company=1), op(0.52, "r1", Type.INVOKE, F.COMMIT, company=1),
                   op(0.53, "r1", Type.OK, F.WRITE, company=1)]
    assert judged(late_record).safety is Safety.SAFE
    truly_inside = late_record[:1] + [op(0.30, "r1", Type.OK, F.ACQUIRE, company=1, scope="company")] + \
        late_record[1:2] + late_record[3:]
    assert invalid(overlapping_writes(facts(truly_inside)))


# Issue 13, point 5: r0 commits after r1's later grant, and r1 then fails or never writes.
def test_a_stale_write_counts_even_when_the_later_holder_then_failed():
    history = [op(0.00, "r0", Type.OK, F.ACQUIRE, scope="run"), op(0.10, "r1", Type.OK, F.ACQUIRE, scope="run"),
               op(0.12, "r1", Type.INVOKE, F.WRITE, company=1), op(0.15, "r1", Type.FAIL, F.WRITE, company=1),
               op(0.20, "r0", Type.INVOKE, F.WRITE, company=1), op(0.24, "r0", Type.INVOKE, F.COMMIT, company=1),
               op(0.25, "r0", Type.OK, F.WRITE, company=1)]
    assert judged(history, {1: {"rows": 250, "runs": ["r0"]}}).kind is Kind.STALE_WRITE_ACCEPTED


def test_a_stale_write_counts_even_when_the_later_holder_never_wrote():
    history = [op(0.00, "r0", Type.OK, F.ACQUIRE, scope="run"), op(0.10, "r1", Type.OK, F.ACQUIRE, scope="run"),
               op(0.11, "r1", Type.OK, F.RELEASE), op(0.20, "r0", Type.OK, F.WRITE, company=1)]
    assert judged(history).kind is Kind.STALE_WRITE_ACCEPTED
    # ...and r0's write before r1's grant is not stale.
    early = [history[0], op(0.05, "r0", Type.OK, F.WRITE, company=1), *history[1:3]]
    assert not invalid(stale_writes(facts(early), storage_orders=False))


def test_a_fence_that_orders_two_writes_is_not_a_stale_write_for_either():
    # r1 was granted the run first but locked company 2 (its fence row) only after r0's write of it
    # committed: the storage ordered them, r1 overwrote r0, and neither write is stale.
    history = [op(0.00, "r0", Type.OK, F.ACQUIRE, scope="run"), op(0.56, "r1", Type.OK, F.ACQUIRE, scope="run"),
               op(0.786, "r0", Type.OK, F.ACQUIRE, company=2, scope="company"),
               op(0.788, "r0", Type.INVOKE, F.COMMIT, company=2), op(0.789, "r0", Type.OK, F.WRITE, company=2),
               op(0.790, "r1", Type.OK, F.ACQUIRE, company=2, scope="company"),
               op(0.792, "r1", Type.INVOKE, F.COMMIT, company=2), op(0.793, "r1", Type.OK, F.WRITE, company=2)]
    assert judged(history, {2: {"rows": 250, "runs": ["r1"]}}).safety is Safety.SAFE


def test_a_grant_while_a_release_is_in_flight_is_that_release_working_not_a_false_one():
    # r3's release freed the lock at the server, r2 got it, then r3's call returned and was recorded.
    history = [op(1.065, "r3", Type.OK, F.ACQUIRE, scope="run"), op(1.0885, "r3", Type.INVOKE, F.RELEASE),
               op(1.089, "r2", Type.OK, F.ACQUIRE, scope="run"), op(1.090, "r3", Type.OK, F.RELEASE)]
    assert not invalid(false_releases(facts(history))) and judged(history, {}).lock is Valid.TRUE
    # A grant to r2 before r3 even asked to release: r3 had lost the lock, and its release lied.
    lost = [history[0], op(1.07, "r2", Type.OK, F.ACQUIRE, scope="run"), op(1.0885, "r3", Type.INVOKE, F.RELEASE),
            op(1.090, "r3", Type.OK, F.RELEASE)]
    assert judged(lost, {}).kind is Kind.FALSE_RELEASE


def test_a_newer_holder_the_fence_refused_never_held_the_company():
    # r0 fenced the company, stalled past its lease and committed; r1 was granted but waited behind r0's
    # fence and was refused once r2 wrote: the storage kept the writes in grant order, nothing was stale.
    history = [op(0.008, "r0", Type.OK, F.ACQUIRE, scope="run"),
               op(0.012, "r0", Type.OK, F.ACQUIRE, company=1, scope="company"),
               op(1.022, "r1", Type.OK, F.ACQUIRE, scope="run"), op(1.023, "r1", Type.INVOKE, F.WRITE, company=1),
               op(2.031, "r2", Type.OK, F.ACQUIRE, scope="run"), op(2.517, "r0", Type.INVOKE, F.COMMIT, company=1),
               op(2.519, "r0", Type.OK, F.WRITE, company=1),
               op(2.520, "r2", Type.OK, F.ACQUIRE, company=1, scope="company"),
               op(2.523, "r2", Type.INVOKE, F.COMMIT, company=1), op(2.525, "r2", Type.OK, F.WRITE, company=1),
               op(2.526, "r1", Type.FAIL, F.WRITE, company=1, fenced=True)]
    v = judged(history, {1: {"rows": 250, "runs": ["r2"]}})
    assert v.safety is Safety.SAFE and not invalid(stale_writes(facts(history), storage_orders=True))


def test_a_fence_whose_tokens_went_backwards_lets_an_older_holder_overwrite_a_newer_one():
    # The counter was reset (a restart without persistence): r1, granted later, drew a lower token and
    # wrote first; r0 then passed the fence with its higher token and overwrote r1's newer rebuild.
    history = [op(0.00, "r0", Type.OK, F.ACQUIRE, token=5, scope="run"),
               op(1.00, "r1", Type.OK, F.ACQUIRE, token=1, scope="run"),
               op(1.01, "r1", Type.OK, F.ACQUIRE, company=1, scope="company"),
               op(1.02, "r1", Type.INVOKE, F.COMMIT, company=1), op(1.03, "r1", Type.OK, F.WRITE, company=1),
               op(2.00, "r0", Type.OK, F.ACQUIRE, company=1, scope="company"),
               op(2.01, "r0", Type.INVOKE, F.COMMIT, company=1), op(2.02, "r0", Type.OK, F.WRITE, company=1)]
    assert judged(history, {1: {"rows": 250, "runs": ["r0"]}}).kind is Kind.STALE_WRITE_ACCEPTED


# --- did the holder's lease hold (lab/checkers/lease.py, read by the margin search) -------------------------

def test_a_lease_shown_gone_by_its_release_or_renewal_or_server_is_not_held():
    from lab.checkers.lease import lease_held

    granted = [op(0.0, "holder", Type.INVOKE, F.ACQUIRE), op(0.01, "holder", Type.OK, F.ACQUIRE, scope="run")]
    for gone in ([op(1.0, "holder", Type.INVOKE, F.RELEASE), op(1.01, "holder", Type.FAIL, F.RELEASE)],
                 [op(0.5, "holder", Type.FAIL, F.RENEW), op(1.0, "holder", Type.INVOKE, F.RELEASE),
                  op(1.01, "holder", Type.OK, F.RELEASE)],
                 [op(0.9, "holder", Type.OK, F.HELD, held=False)]):
        history = in_time([*granted, *gone])
        finding = lease_held(history)
        assert finding.valid is Valid.FALSE and finding.kind is None
        assert [history[i] for i in finding.proof] == [gone[-1] if gone[-1].f is F.HELD else
                                                        next(o for o in gone if o.type is Type.FAIL)]


def test_a_lease_shown_held_by_its_own_holder_after_its_grant_is_held():
    from lab.checkers.lease import lease_held

    history = in_time([op(0.0, "holder", Type.FAIL, F.RENEW),  # before its grant: says nothing of this lease
                       op(0.01, "holder", Type.OK, F.ACQUIRE, scope="run"),
                       op(0.2, "contender", Type.INVOKE, F.RELEASE), op(0.21, "contender", Type.FAIL, F.RELEASE),
                       op(0.5, "holder", Type.OK, F.RENEW), op(0.9, "holder", Type.OK, F.HELD, held=True),
                       op(1.0, "holder", Type.INVOKE, F.RELEASE), op(1.01, "holder", Type.OK, F.RELEASE)])
    assert lease_held(history).valid is Valid.TRUE
    quiet = in_time([op(0.01, "holder", Type.OK, F.ACQUIRE, scope="run"), op(1.0, "holder", Type.INVOKE, F.RELEASE),
                     op(1.01, "holder", Type.INFO, F.RELEASE)])  # nobody knows how its release ended
    assert lease_held(quiet).valid is Valid.UNKNOWN
    inside = in_time([op(0.01, "holder", Type.OK, F.ACQUIRE, scope="company", company=1),
                      op(1.01, "holder", Type.OK, F.RELEASE)])
    assert lease_held(inside).valid is Valid.UNKNOWN  # no run-level grant: no lease to have held
