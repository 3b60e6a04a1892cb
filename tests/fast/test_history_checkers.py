"""The checkers on the kill-point histories of schema 1: each planted violation is caught through the same
judge every scenario uses (its events read as operations), and a clean history passes."""

from lab.checkers import ops
from lab.checkers.judge import facts_of, false_releases, judge, overlapping_writes, stale_writes
from lab.checkers.outcomes import Safety
from lab.checkers.verdict import Kind, Valid


def ev(t, run, event, **fields):
    return {"t": t, "run": run, "event": event, **fields}


def judged(events, final=None, exclusion=True):
    return judge(ops.from_events(events), final or {1: {"rows": 250, "runs": ["r1"]}}, 250, exclusion)


def facts(events):
    return facts_of(ops.from_events(events))


def invalid(finding) -> bool:
    return finding.valid is Valid.FALSE


CLEAN = [
    ev(0.00, "r0", "acquire_granted", token=1), ev(0.01, "r0", "write_begun", company=1),
    ev(0.02, "r0", "write_committed", company=1), ev(0.025, "r0", "release_requested"),
    ev(0.03, "r0", "release", ok=True),
    ev(0.04, "r1", "acquire_granted", token=2), ev(0.05, "r1", "write_begun", company=1),
    ev(0.06, "r1", "write_committed", company=1), ev(0.07, "r1", "release", ok=True),
    ev(0.08, "observer", "observed", company=1, count=250),
]


def test_a_clean_history_passes_every_check():
    v = judged(CLEAN)
    assert (v.kind, v.safety, v.lock) == (Kind.INTACT, Safety.SAFE, Valid.TRUE)
    assert not any(invalid(f) for f in v.findings)


# r0 is granted first, loses its right unknowingly; r1 is granted and rebuilds; r0's rebuild lands last.
STALE = [ev(0.00, "r0", "acquire_granted"), ev(0.10, "r1", "acquire_granted"),
         ev(0.12, "r1", "write_committed", company=1), ev(0.20, "r0", "write_begun", company=1),
         ev(0.25, "r0", "write_committed", company=1)]


def test_an_older_grants_write_landing_after_a_newer_ones_is_stale():
    # The stale rebuild landed last, so the company holds its rows (r1's would mean r0's acknowledged write was lost).
    assert judged(STALE, {1: {"rows": 250, "runs": ["r0"]}}).kind is Kind.STALE_WRITE_ACCEPTED
    assert invalid(stale_writes(facts(STALE), storage_orders=False))


def test_a_fenced_write_refused_is_not_stale():
    refused = STALE[:3] + [ev(0.25, "r0", "write_rejected", company=1)]
    v = judged(refused)
    assert (v.kind, v.safety, v.lock) == (Kind.STALE_WRITE_REJECTED, Safety.SAFE, Valid.FALSE)


def test_writes_in_grant_order_are_not_stale_even_if_the_first_commits_late():
    # The fence row made r1 wait for r0's transaction: r0 commits first, r1 overwrites it. No harm, although
    # the lock itself was two-held (r1 was granted while r0 still believed it held).
    ordered = [ev(0.00, "r0", "acquire_granted"), ev(0.01, "r0", "company_locked", company=1),
               ev(0.10, "r1", "acquire_granted"), ev(0.25, "r0", "write_committed", company=1),
               ev(0.26, "r1", "company_locked", company=1), ev(0.30, "r1", "write_committed", company=1)]
    v = judged(ordered)
    assert (v.kind, v.safety, v.lock) == (Kind.INTACT, Safety.SAFE, Valid.FALSE)


def test_company_locks_are_per_company():
    other_company = [ev(0.00, "r0", "company_locked", company=1), ev(0.10, "r1", "company_locked", company=2),
                     ev(0.15, "r1", "write_committed", company=2), ev(0.20, "r0", "write_committed", company=1)]
    assert not invalid(stale_writes(facts(other_company), storage_orders=True))
    same_company = [ev(0.00, "r0", "company_locked", company=1), ev(0.10, "r1", "company_locked", company=1),
                    ev(0.15, "r1", "write_committed", company=1), ev(0.20, "r0", "write_committed", company=1)]
    assert invalid(stale_writes(facts(same_company), storage_orders=True))


def test_overlapping_committed_writes_of_one_company_are_caught():
    planted = [ev(0.0, "r0", "write_begun", company=1), ev(0.1, "r1", "write_begun", company=1),
               ev(0.2, "r0", "write_committed", company=1), ev(0.3, "r1", "write_committed", company=1)]
    assert overlapping_writes(facts(planted)).kind is Kind.OVERLAPPING_WRITES and invalid(overlapping_writes(facts(planted)))
    assert not invalid(overlapping_writes(facts(CLEAN)))


def test_a_release_claiming_success_after_losing_the_lock_is_false():
    planted = [ev(0.0, "r0", "acquire_granted"), ev(0.1, "r1", "acquire_granted"), ev(0.2, "r0", "release", ok=True)]
    assert judged(planted).kind is Kind.FALSE_RELEASE
    honest = planted[:2] + [ev(0.2, "r0", "release", ok=False)]
    assert not invalid(false_releases(facts(honest)))


def test_torn_and_mixed_states_are_caught():
    torn = judged([ev(0.0, "r0", "write_begun", company=1), ev(0.1, "observer", "observed", company=1, count=0),
                   ev(0.2, "r0", "write_committed", company=1)])
    assert (torn.kind, torn.figures["seen"]) == (Kind.TORN, [0])
    assert judged(CLEAN, {1: {"rows": 500, "runs": ["r0", "r1"]}}).kind is Kind.MERGED


def test_backends_that_promise_nothing_are_held_to_the_data_checks_only():
    final = {1: {"rows": 250, "runs": ["r0"]}}
    assert judged(STALE, final, exclusion=False).safety is not Safety.UNSAFE
    assert judged(STALE, final, exclusion=True).safety is Safety.UNSAFE


def test_a_waiter_granted_by_a_commit_recorded_late_is_not_an_overlap():
    # r0's thread records its commit after r1, which that commit unblocked, records its lock.
    late_record = [ev(0.00, "r0", "company_locked", company=1), ev(0.50, "r0", "commit_requested", company=1),
                   ev(0.51, "r1", "company_locked", company=1), ev(0.512, "r0", "write_committed", company=1),
                   ev(0.52, "r1", "commit_requested", company=1), ev(0.53, "r1", "write_committed", company=1)]
    assert judged(late_record).safety is Safety.SAFE
    truly_inside = late_record[:1] + [ev(0.30, "r1", "company_locked", company=1)] + late_record[1:2] + \
        late_record[3:]
    assert invalid(overlapping_writes(facts(truly_inside)))


# Issue 13, point 5: r0 commits after r1's later grant, and r1 then fails or never writes.
def test_a_stale_write_counts_even_when_the_later_holder_then_failed():
    history = [ev(0.00, "r0", "acquire_granted"), ev(0.10, "r1", "acquire_granted"),
               ev(0.12, "r1", "write_begun", company=1), ev(0.15, "r1", "write_failed", company=1),
               ev(0.20, "r0", "write_begun", company=1), ev(0.24, "r0", "commit_requested", company=1),
               ev(0.25, "r0", "write_committed", company=1)]
    assert judged(history, {1: {"rows": 250, "runs": ["r0"]}}).kind is Kind.STALE_WRITE_ACCEPTED


def test_a_stale_write_counts_even_when_the_later_holder_never_wrote():
    history = [ev(0.00, "r0", "acquire_granted"), ev(0.10, "r1", "acquire_granted"),
               ev(0.11, "r1", "release", ok=True), ev(0.20, "r0", "write_committed", company=1)]
    assert judged(history).kind is Kind.STALE_WRITE_ACCEPTED
    # ...and r0's write before r1's grant is not stale.
    early = [history[0], ev(0.05, "r0", "write_committed", company=1), *history[1:3]]
    assert not invalid(stale_writes(facts(early), storage_orders=False))


def test_a_fence_that_orders_two_writes_is_not_a_stale_write_for_either():
    # r1 was granted the run first but locked company 2 (its fence row) only after r0's write of it
    # committed: the storage ordered them, r1 overwrote r0, and neither write is stale.
    history = [ev(0.00, "r0", "acquire_granted"), ev(0.56, "r1", "acquire_granted"),
               ev(0.786, "r0", "company_locked", company=2), ev(0.788, "r0", "commit_requested", company=2),
               ev(0.789, "r0", "write_committed", company=2), ev(0.790, "r1", "company_locked", company=2),
               ev(0.792, "r1", "commit_requested", company=2), ev(0.793, "r1", "write_committed", company=2)]
    assert judged(history, {2: {"rows": 250, "runs": ["r1"]}}).safety is Safety.SAFE


def test_a_grant_while_a_release_is_in_flight_is_that_release_working_not_a_false_one():
    # r3's release freed the lock at the server, r2 got it, then r3's call returned and was recorded.
    history = [ev(1.065, "r3", "acquire_granted"), ev(1.0885, "r3", "release_requested"),
               ev(1.089, "r2", "acquire_granted"), ev(1.090, "r3", "release", ok=True)]
    assert not invalid(false_releases(facts(history))) and judged(history, {}).lock is Valid.TRUE
    # A grant to r2 before r3 even asked to release: r3 had lost the lock, and its release lied.
    lost = [history[0], ev(1.07, "r2", "acquire_granted"), ev(1.0885, "r3", "release_requested"),
            ev(1.090, "r3", "release", ok=True)]
    assert judged(lost, {}).kind is Kind.FALSE_RELEASE


def test_a_newer_holder_the_fence_refused_never_held_the_company():
    # r0 fenced the company, stalled past its lease and committed; r1 was granted but waited behind r0's
    # fence and was refused once r2 wrote: the storage kept the writes in grant order, nothing was stale.
    history = [ev(0.008, "r0", "acquire_granted"), ev(0.012, "r0", "company_locked", company=1),
               ev(1.022, "r1", "acquire_granted"), ev(1.023, "r1", "write_begun", company=1),
               ev(2.031, "r2", "acquire_granted"), ev(2.517, "r0", "commit_requested", company=1),
               ev(2.519, "r0", "write_committed", company=1), ev(2.520, "r2", "company_locked", company=1),
               ev(2.523, "r2", "commit_requested", company=1), ev(2.525, "r2", "write_committed", company=1),
               ev(2.526, "r1", "write_rejected", company=1)]
    v = judged(history, {1: {"rows": 250, "runs": ["r2"]}})
    assert v.safety is Safety.SAFE and not invalid(stale_writes(facts(history), storage_orders=True))


def test_a_fence_whose_tokens_went_backwards_lets_an_older_holder_overwrite_a_newer_one():
    # The counter was reset (a restart without persistence): r1, granted later, drew a lower token and
    # wrote first; r0 then passed the fence with its higher token and overwrote r1's newer rebuild.
    history = [ev(0.00, "r0", "acquire_granted", token=5), ev(1.00, "r1", "acquire_granted", token=1),
               ev(1.01, "r1", "company_locked", company=1), ev(1.02, "r1", "commit_requested", company=1),
               ev(1.03, "r1", "write_committed", company=1), ev(2.00, "r0", "company_locked", company=1),
               ev(2.01, "r0", "commit_requested", company=1), ev(2.02, "r0", "write_committed", company=1)]
    assert judged(history, {1: {"rows": 250, "runs": ["r0"]}}).kind is Kind.STALE_WRITE_ACCEPTED
