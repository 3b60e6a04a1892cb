"""The one set of checkers: pure functions of a trial's history (and the final table) -> a typed Verdict.

Every judged scenario hands its history here, so the same behaviour reads the same in every column.
Each checker returns a `Finding` (valid true / false / unknown, the kind it found, the operations
that prove it); `judge` runs them all and keeps the worst. The times a checker compares are the
sound bounds: a write is bounded by when its COMMIT was asked (a run waiting on that transaction is
granted after it), a run-level right by its grant and the moment its holder asked to release it or
heard it was gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from lab.checkers.linearizable import mutex_finding
from lab.checkers.measure_level import detected_within
from lab.checkers.ops import F, Op, Type
from lab.checkers.verdict import RANK, Finding, Kind, Timeline, Valid, Verdict, worst

RUN, COMPANY = "run", "company"


@dataclass
class Write:
    """One process's write of one company: when it began, asked to commit, and how it ended."""

    process: str
    company: int | None
    begun: float | None = None
    commit_asked: float | None = None
    ended: float | None = None
    outcome: str = "open"  # committed / failed / rejected / indeterminate / open (never completed)
    resolved: str | None = None  # for indeterminate: what a fresh read of the table found
    token: object = None
    index: int | None = None  # the operation that ended it

    @property
    def landed(self) -> bool:
        """Committed, or an indeterminate commit the table showed had landed."""
        return self.outcome == "committed" or (self.outcome == "indeterminate" and self.resolved == "committed")

    @property
    def bound(self) -> float:
        """When the write took effect at the latest known sound bound: its COMMIT request, else its end."""
        return self.commit_asked if self.commit_asked is not None else (self.ended or 0.0)


@dataclass
class Right:
    """A process's right to a company: a run-level grant or a lock inside the write, and when it ended
    for the holder's own belief (asked to release, told it was gone, or killed)."""

    process: str
    scope: str
    granted: float
    company: int | None = None
    believed_until: float = float("inf")
    index: int = 0


@dataclass
class Facts:
    """What the history says, arranged for the checkers."""

    ops: list[Op]
    rights: list[Right] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    asked: dict = field(default_factory=dict)  # process -> times it asked (acquire or write invokes)
    observed: list[tuple[int, int, int]] = field(default_factory=list)  # (index, company, count)

    def rights_of(self, process: str, company: int | None, before: float) -> list[Right]:
        return [r for r in self.rights if r.process == process and r.granted <= before
                and (r.scope == RUN or r.company == company)]

    def right_at(self, process: str, company: int | None, at: float) -> Right | None:
        """The process's latest right to the company granted by a time (run-level first, as it covers all)."""
        mine = self.rights_of(process, company, at)
        run_level = [r for r in mine if r.scope == RUN]
        chosen = run_level or mine
        return max(chosen, key=lambda r: r.granted) if chosen else None


def facts_of(ops: list[Op]) -> Facts:
    """Rights, writes, first asks and observations, read from the history in order."""
    facts = Facts(ops)
    open_writes: dict[tuple, Write] = {}
    for i, op in enumerate(ops):
        p, company = op.process, op.get("company")
        if op.type is Type.INVOKE and op.f in (F.ACQUIRE, F.WRITE):
            facts.asked.setdefault(p, []).append(op.time)
        if op.f is F.ACQUIRE and op.type is Type.OK:
            scope = op.get("scope", RUN)
            if scope == COMPANY and company is None:
                pass  # acquire() of a lock that lives in the write only says "go on": the right is its company lock
            else:
                facts.rights.append(Right(p, scope, op.time, company if scope == COMPANY else None, index=i))
            if scope == COMPANY and company is not None and (p, company) not in open_writes:
                open_writes[(p, company)] = Write(p, company, begun=op.time)  # a history without write invokes
        elif op.f is F.WRITE and op.type is Type.INVOKE:
            open_writes[(p, company)] = Write(p, company, begun=op.time, token=op.get("token"))
        elif op.f is F.COMMIT and op.type is Type.INVOKE:
            open_writes.setdefault((p, company), Write(p, company, begun=op.time)).commit_asked = op.time
        elif op.f is F.WRITE:
            write = open_writes.pop((p, company), None) or Write(p, company, begun=op.time)
            write.ended, write.index = op.time, i
            write.token = op.get("token", write.token)
            if op.type is Type.OK:
                write.outcome = "committed"
            elif op.type is Type.INFO:
                write.outcome, write.resolved = "indeterminate", op.get("resolved")
            else:
                write.outcome = "rejected" if op.get("fenced") else "failed"
            facts.writes.append(write)
        elif op.f is F.OBSERVE and company is not None and op.get("count") is not None:
            facts.observed.append((i, company, int(op.get("count"))))
        _end_belief(facts, op)
    facts.writes.extend(open_writes.values())  # begun and never completed: a killed run
    return facts


def _end_belief(facts: Facts, op: Op) -> None:
    """A run-level right stops being believed when its holder asks to release it, hears it is gone
    (told, held() false, a failed renewal) or is killed by the fault."""
    ends = None
    if op.f is F.RELEASE and op.type is Type.INVOKE:
        ends = op.process
    elif op.f is F.TOLD or (op.f is F.HELD and op.type is Type.OK and op.get("held") is False):
        ends = op.process
    elif op.f is F.RENEW and op.type is Type.FAIL:
        ends = op.process
    elif op.f is F.FAULT and op.get("kills"):
        ends = op.get("kills")
    if ends is None:
        return
    for right in facts.rights:
        if right.process == ends and right.scope == RUN and right.believed_until == float("inf"):
            right.believed_until = op.time


# --- the checkers ------------------------------------------------------------------------------------------

def exclusion(facts: Facts) -> Finding:
    """The lock as a mutex: another process granted a run-level right while a holder still believed it held
    its own. A right inside the write is judged by its committed writes instead (overlapping_writes)."""
    for held in (r for r in facts.rights if r.scope == RUN):
        for other in facts.rights:
            if other.process != held.process and held.granted < other.granted < held.believed_until:
                return Finding("exclusion", Valid.FALSE, Kind.LOST, (held.index, other.index),
                               f"{other.process} was granted at {other.granted:.3f}s while {held.process} "
                               f"(granted {held.granted:.3f}s) still believed it held")
    return Finding("exclusion", Valid.TRUE)


def stale_writes(facts: Facts, storage_orders: bool) -> Finding:
    """A write that landed after a newer holder's right to the same company: the storage accepted it.

    Process B is newer than A when B got its right later. A's write is stale when, before it committed,
    a newer B committed its own rebuild of the company, or held the company: from B's lock on it where
    the storage locks or fences each company inside the write (a B still waiting behind A's lock is
    ordered after A by the storage), elsewhere from B's run-level grant.
    """
    landed = sorted((w for w in facts.writes if w.landed), key=lambda w: w.bound)
    for write in landed:
        mine = facts.right_at(write.process, write.company, write.bound)
        if mine is None:
            continue
        for theirs in landed:
            if theirs.process != write.process and theirs.company == write.company and theirs.bound < write.bound:
                right = facts.right_at(theirs.process, theirs.company, theirs.bound)
                if right is not None and right.granted > mine.granted:
                    return Finding("stale write", Valid.FALSE, Kind.STALE_WRITE_ACCEPTED, _idx(write) + _idx(theirs),
                                   f"{write.process} committed at {write.bound:.3f}s after {theirs.process} "
                                   f"(granted {right.granted:.3f}s) had committed its rebuild")
        for right in facts.rights:
            held = (right.process != write.process and mine.granted < right.granted < write.bound
                    and (right.scope == COMPANY and right.company == write.company if storage_orders
                         else right.scope == RUN))
            # Newer by the holder's right, not by when it locked the company: an older run's lock taken late is old.
            age = facts.right_at(right.process, write.company, right.granted) if held else None
            if age is not None and age.granted > mine.granted:
                return Finding("stale write", Valid.FALSE, Kind.STALE_WRITE_ACCEPTED, (*_idx(write), right.index),
                               f"{write.process} (granted {mine.granted:.3f}s) committed at {write.bound:.3f}s, "
                               f"after {right.process} was granted the company at {right.granted:.3f}s")
    return Finding("stale write", Valid.TRUE)


def overlapping_writes(facts: Facts) -> Finding:
    """Two processes inside committed writes of one company at once (from the lock inside the write, or
    the first statement without one, until the COMMIT request)."""
    spans = []
    for w in (w for w in facts.writes if w.landed):
        locks = [r.granted for r in facts.rights if r.process == w.process and r.scope == COMPANY
                 and r.company == w.company and w.begun is not None and w.begun <= r.granted <= w.bound]
        spans.append((w, max(locks) if locks else (w.begun if w.begun is not None else w.bound)))
    for i, (a, a_start) in enumerate(spans):
        for b, b_start in spans[i + 1:]:
            if a.company == b.company and a.process != b.process and a_start < b.bound and b_start < a.bound:
                return Finding("overlapping writes", Valid.FALSE, Kind.OVERLAPPING_WRITES, _idx(a) + _idx(b),
                               f"{a.process} [{a_start:.3f}-{a.bound:.3f}s] and {b.process} "
                               f"[{b_start:.3f}-{b.bound:.3f}s]")
    return Finding("overlapping writes", Valid.TRUE)


def false_releases(facts: Facts) -> Finding:
    """A release that reported success although another process was granted the right since the holder's
    grant and before it asked to release (a grant after the ask may be the release itself working)."""
    for i, op in enumerate(facts.ops):
        if op.f is not F.RELEASE or op.type is not Type.OK:
            continue
        asks = [o.time for o in facts.ops if o.process == op.process and o.f is F.RELEASE
                and o.type is Type.INVOKE and o.time <= op.time]
        until = max(asks) if asks else op.time
        mine = [r.granted for r in facts.rights if r.process == op.process and r.scope == RUN and r.granted <= until]
        if mine and any(r.process != op.process and r.scope == RUN and max(mine) < r.granted < until
                        for r in facts.rights):
            return Finding("false release", Valid.FALSE, Kind.FALSE_RELEASE, (i,),
                           f"{op.process}'s release reported success for a lock another process had taken")
    return Finding("false release", Valid.TRUE)


def company_state(final: dict, size: int) -> Finding:
    """Each company at the end holds one run's whole rebuild.

    final: company -> {'rows': n, 'runs': [run ids]} (empty: the trial did not read the table).
    """
    for company, state in sorted((final or {}).items()):
        rows, runs = state["rows"], state["runs"]
        if rows > size or len(runs) > 1:
            return Finding("company", Valid.FALSE, Kind.MERGED, (), f"company {company}: {rows} rows from {runs}")
        if rows < size:
            return Finding("company", Valid.FALSE, Kind.SHORT, (), f"company {company}: {rows} rows")
    return Finding("company", Valid.TRUE if final else Valid.UNKNOWN)


SEED = "seed"  # the rows a trial writes before its history starts (CompanyTable.seed)


def acknowledged_writes(facts: Facts, final: dict) -> Finding:
    """Every commit that returned ok is in the final state, unless a write that may have landed after it replaced it.

    A company's rows carry the id of the run that wrote them (its process in the history), so the final
    table names whose rebuild survived. An acknowledged write w of run R is *lost* when R's rows are not
    there and every write of the runs whose rows are (each that landed or may have: committed, unresolved,
    never completed) ended before w's COMMIT was asked, so none of them can have replaced it; the seed was
    written before the history began. That is what a primary rewound after a split brain, or a failover that
    lost the old primary's tail, leaves. Where the history cannot decide (the table was not read, it holds
    rows of a run the history does not know, or R wrote the company twice and either write could be the one
    there), the finding is unknown, never a guess.
    """
    lost, undecided = discarded_writes(facts, final)
    if lost:
        write = lost[0]
        kept = ", ".join(sorted((final or {})[write.company]["runs"])) or "no run's"
        return Finding("acknowledged writes", Valid.FALSE, Kind.ACKNOWLEDGED_WRITE_LOST, _idx(write),
                       f"{write.process}'s commit of company {write.company} (asked {_commit_lower_bound(write):.3f}s) "
                       f"returned ok, and the company ends with {kept} rows, written before it")
    if undecided:
        return Finding("acknowledged writes", Valid.UNKNOWN, None, (), undecided)
    return Finding("acknowledged writes", Valid.TRUE)


def discarded_writes(facts: Facts, final: dict) -> tuple[list[Write], str]:
    """The acknowledged writes the store threw away (acknowledged_writes' rule, every one of them, in history order),
    and why the rest could not be decided ('' when every one could)."""
    lost: list[Write] = []
    undecided = ""
    for write in (w for w in facts.writes if w.outcome == "committed" and w.company is not None):
        state = (final or {}).get(write.company)
        if state is None:
            undecided = undecided or f"company {write.company} was not read at the end"
            continue
        runs = set(state["runs"])
        candidates = {p: [w for w in facts.writes if w.process == p and w.company == write.company and _may_have_landed(w)]
                      for p in runs if p != SEED}
        if any(not found for found in candidates.values()):
            unknown = sorted(p for p, found in candidates.items() if not found)
            undecided = undecided or f"company {write.company} holds rows of {unknown}, whom the history shows no write of"
            continue
        if write.process in runs:
            if len(candidates[write.process]) > 1:
                undecided = undecided or (f"{write.process} wrote company {write.company} more than once, and either "
                                          "write may be the one in the table")
            continue
        asked = _commit_lower_bound(write)
        if not [w for found in candidates.values() for w in found if w.ended is None or w.ended >= asked]:
            lost.append(write)
    return lost, undecided


def absent_writes(facts: Facts, final: dict, discarded: list[Write]) -> list[Write]:
    """Writes that landed (or may have) but whose run's rows are not in the company at the end, other than those
    proven discarded: replaced by a later rebuild, or, where the store forked, thrown away with the losing primary
    when the history cannot tell which (two primaries' commits a few milliseconds apart). A company whose end state
    was not read keeps every write."""
    out = []
    for write in facts.writes:
        state = (final or {}).get(write.company)
        if state is None or write in discarded or not _may_have_landed(write):
            continue
        if write.process not in set(state["runs"]):
            out.append(write)
    return out


def survived(facts: Facts, discarded: list[Write]) -> Facts:
    """The history the store kept: the same facts, with each write not in the surviving company (discarded, or
    replaced) as one that never landed, and the lock it took inside that transaction gone with it. A holder's commit
    that a rewind threw away cannot have made a write stale or two writes overlap in the company."""
    gone = {id(w) for w in discarded}
    writes = [replace(w, outcome="discarded") if id(w) in gone else w for w in facts.writes]

    def inside_a_gone_write(right: Right) -> bool:
        return right.scope == COMPANY and any(
            w.process == right.process and w.company == right.company and w.begun is not None
            and w.begun <= right.granted <= w.bound for w in discarded)

    return replace(facts, writes=writes, rights=[r for r in facts.rights if not inside_a_gone_write(r)])


def _may_have_landed(write: Write) -> bool:
    """Committed, an indeterminate commit not shown to have failed, or a write that never completed."""
    return write.landed or write.outcome == "open" or (
        write.outcome == "indeterminate" and write.resolved != "not committed")


def _commit_lower_bound(write: Write) -> float:
    """The earliest a write can have taken effect: when its COMMIT was asked, else when it began."""
    for bound in (write.commit_asked, write.begun, write.ended):
        if bound is not None:
            return bound
    return 0.0


def torn_states(facts: Facts, size: int) -> Finding:
    """An observer never saw a company that was not one whole rebuild (half deleted, or doubled)."""
    torn = [(i, c, n) for i, c, n in facts.observed if n != size]
    if torn:
        return Finding("torn", Valid.FALSE, Kind.TORN, tuple(i for i, _, _ in torn),
                       f"an observer saw {sorted({n for _, _, n in torn})} rows")
    return Finding("torn", Valid.TRUE if facts.observed else Valid.UNKNOWN)


def superseded_writes(facts: Facts) -> list[tuple[Write, Right]]:
    """Writes by a process after another process got the company's right while the writer's right was in force:
    (its write, the newer right). For a right inside the write, in force means its write was still open."""
    out = []
    for write in facts.writes:
        mine = facts.right_at(write.process, write.company, write.bound if write.ended else float("inf"))
        if mine is None:
            continue
        end = write.ended if write.ended is not None else float("inf")
        for right in facts.rights:
            if right.process == write.process or right.granted <= mine.granted or right.granted >= end:
                continue
            if right.scope == RUN or right.company == write.company:
                out.append((write, right))
                break
    return out


def lapsed_writes(facts: Facts) -> Finding:
    """What became of writes whose right had lapsed: refused by the fence, rolled back, or unknown.

    A right inside the write lapses with its transaction, so any such write that failed counts; a
    run-level right lapses when another process is granted it."""
    found: list[Finding] = []
    superseded = superseded_writes(facts)
    failed_in_write = [w for w in facts.writes if not w.landed and _lapsed_with_transaction(facts, w)]
    for write in {id(w): w for w in [*(w for w, _ in superseded), *failed_in_write]}.values():
        if write.outcome == "rejected":
            found.append(Finding("lapsed write", Valid.TRUE, Kind.STALE_WRITE_REJECTED, _idx(write),
                                 f"the fence refused {write.process}'s write"))
        elif write.outcome == "failed":
            found.append(Finding("lapsed write", Valid.TRUE, Kind.ROLLED_BACK, _idx(write),
                                 f"{write.process}'s write rolled back"))
        elif write.outcome == "indeterminate" and write.resolved not in ("committed", "not committed"):
            found.append(Finding("indeterminate", Valid.UNKNOWN, Kind.INDETERMINATE, _idx(write),
                                 f"{write.process}'s COMMIT was in flight when its connection broke, and the "
                                 "table could not say whether it landed"))
        elif write.outcome == "indeterminate" and write.resolved == "not committed":
            found.append(Finding("lapsed write", Valid.TRUE, Kind.ROLLED_BACK, _idx(write),
                                 f"{write.process}'s COMMIT was in flight when its connection broke; it did not land"))
    if not found:
        return Finding("lapsed write", Valid.TRUE)
    return min(found, key=lambda f: RANK[f.kind] if f.kind is not None else len(RANK))  # each has a kind


def _lapsed_with_transaction(facts: Facts, write: Write) -> bool:
    """A right inside the write lapses with its transaction, so such a write that did not land lost its right;
    a refused write was refused for a right the fence saw superseded. A run-level right outlives a failed write."""
    if write.outcome == "rejected":
        return True
    right = facts.right_at(write.process, write.company, write.bound)
    return right is not None and right.scope == COMPANY and write.outcome in ("failed", "indeterminate")


def _idx(write: Write) -> tuple[int, ...]:
    return () if write.index is None else (write.index,)


def contested(facts: Facts) -> bool:
    """Whether the fault was exercised: another process was granted the right, or committed a write of the
    company, while the first holder still believed it held. The holder's own failed write does not count: a
    right nobody else took was not tested, however its holder's write ended.

    The holder believes a run-level right from its grant until it asks to release it or hears it is gone
    (Right.believed_until); a right inside the write, and a write with no right at all (no lock, the control),
    from the write's first statement until it asks to COMMIT, or hears how the write ended (never, for a write
    that never ended).
    A process with no lock takes the company when its write begins.
    """
    if not facts.rights and not facts.writes:
        return False
    holder = _first_holder(facts)
    windows = [(r.granted, r.believed_until) for r in facts.rights if r.process == holder and r.scope == RUN]
    windows += [(w.begun, _belief_end(w)) for w in facts.writes if w.process == holder and w.begun is not None]
    others = [r.granted for r in facts.rights if r.process != holder]
    others += [_took_company(facts, w) for w in facts.writes if w.process != holder and w.landed]
    return any(start < t < end for start, end in windows for t in others)


def _belief_end(write: Write) -> float:
    """When a write's holder stopped believing in its right inside the write: when it asked to COMMIT (the server may
    let a waiter in from then on, before the holder hears its commit's answer), else when it heard how the write
    ended, else never."""
    if write.commit_asked is not None:
        return write.commit_asked
    return write.ended if write.ended is not None else float("inf")


def _took_company(facts: Facts, write: Write) -> float:
    """When another process's landed write took the company: with no right of its own (no lock), at its first
    statement; under a right, at its COMMIT (its grant counts on its own)."""
    if write.begun is not None and facts.right_at(write.process, write.company, write.bound) is None:
        return write.begun
    return write.bound


def _first_holder(facts: Facts) -> str:
    """The process that got the right first (or, with no lock at all, began writing first)."""
    first = min([*(r.granted for r in facts.rights), *(w.begun for w in facts.writes if w.begun is not None)],
                default=None)
    if first is None:  # writes that never began: the first that ended
        return min(facts.writes, key=lambda w: w.bound).process
    holder = next((r.process for r in facts.rights if r.granted == first), None)
    return holder or next(w.process for w in facts.writes if w.begun == first)


def linearizability(ops: list[Op], lease_ttl: float | None) -> list[Finding]:
    """The bounded Wing-Gong search (lab/checkers/linearizable.py): is the history of run-level holds a mutex,
    each hold ending when its holder stopped believing in it? That is the exclusion checker's question asked
    Jepsen's way, with indeterminate operations ordered or left out as they may have been, so it decides: a
    history that is no mutex is a lost lock (Kind.LOST), with the operations that prove it. For a lease, the
    lease model (a second grant only after the first's TTL) is asked as well, as evidence only: a lease lapsing
    by design is no finding. A history with no run-level acquire or release (locks inside the write, no lock)
    gives both nothing to order: unknown, with no kind, so it changes no verdict's kind, lock or answers."""
    found = [mutex_finding(ops, max_seconds=0.5)]
    if lease_ttl:
        lease = mutex_finding(ops, expires_after=lease_ttl, max_seconds=0.5)
        found.append(Finding(f"linearizable (lease, TTL {lease_ttl:g} s)", lease.valid, None, lease.proof,
                             lease.detail))
    return found


def judge(ops: list[Op], final: dict | None, size: int, promises_exclusion: bool = True,
          figures: dict | None = None, lease_ttl: float | None = None) -> Verdict:
    """Every checker over one trial's history, composed: the worst kind found, the lock's exclusion, and
    whether the right was ever contested (exercised).

    Two timelines: the lock's promise and the company are judged on the history that *survived* (an acknowledged
    commit the store later discarded is the store's finding, `acknowledged writes`, and cannot make a write stale
    or two writes overlap); whether two holders believed they held at once (`Verdict.lock`) is judged on the
    history as *acknowledged*, what each holder was told. Where the store discarded nothing, the two are one.

    promises_exclusion: the backend claims one writer per company (capability `exclusion`); a strategy
    that does not (no lock, an idempotent upsert, SERIALIZABLE) is judged by the company alone.
    lease_ttl: the lock is a lease of this TTL; the linearizability evidence then asks the lease model too.
    """
    facts = facts_of(ops)
    discarded, _ = discarded_writes(facts, final or {})
    # Where the fault confirmed the store forked (two primaries at once), a write whose rows are not in the surviving
    # company may have been thrown away with the losing primary rather than replaced: it cannot be told apart, so it
    # is left out of the survived timeline. On one store a replaced stale write is still a stale write.
    forked = any(op.f is F.FAULT and op.get("forked") for op in ops)
    gone = discarded + (absent_writes(facts, final or {}, discarded) if forked else [])
    kept = survived(facts, gone) if gone else facts
    timeline = Timeline.SURVIVED if gone else None
    storage_orders = any(r.scope == COMPANY for r in facts.rights)
    findings = [company_state(final or {}, size), torn_states(facts, size), acknowledged_writes(facts, final or {})]
    lock = exclusion(facts)
    as_told: list[Finding] = []  # the lock checks on the acknowledged timeline, where it differs: evidence only
    if promises_exclusion:
        findings += [_on(stale_writes(kept, storage_orders), timeline), _on(overlapping_writes(kept), timeline),
                     false_releases(facts)]
        if gone:
            as_told = [_on(stale_writes(facts, storage_orders), Timeline.ACKNOWLEDGED),
                       _on(overlapping_writes(facts), Timeline.ACKNOWLEDGED)]
    findings.append(_on(lapsed_writes(kept), timeline))
    findings.append(lock)
    evidence = linearizability(ops, lease_ttl)  # the mutex search decides 'lost' too; the lease model is evidence
    two_at_once = (Kind.LOST, Kind.OVERLAPPING_WRITES, Kind.STALE_WRITE_ACCEPTED) if as_told else (
        Kind.LOST, Kind.OVERLAPPING_WRITES)
    lock_valid = Valid.FALSE if any(f.kind in two_at_once and f.valid is Valid.FALSE
                                    for f in findings + evidence + as_told) else Valid.TRUE
    kinds = [f.kind for f in findings + evidence if f.kind is not None]
    # A lost lock is LOST only when its holder wrote nothing after it to judge: a write it made after the
    # loss decides (accepted stale, refused, rolled back, or ordered behind the newer holder's by the storage).
    if lock_valid is Valid.FALSE and superseded_writes(facts):
        kinds = [k for k in kinds if k is not Kind.LOST]
    if not kinds:
        kinds = [_quiet_kind(facts)]
    shown = dict(figures or {})
    shown["linearizable"] = {f.checker: f.valid.value for f in evidence}
    if final and len(final) == 1:
        shown.setdefault("rows", next(iter(final.values()))["rows"])
    torn = sorted({n for _, _, n in facts.observed if n != size})
    if torn:
        shown.setdefault("seen", torn)
    return Verdict(worst(kinds), lock_valid, contested(facts), tuple(findings + evidence + as_told), shown)


def _on(finding: Finding, timeline: Timeline | None) -> Finding:
    """The finding, saying which history it judged (None: the two histories are one)."""
    return finding if timeline is None else replace(finding, timeline=timeline)


def _quiet_kind(facts: Facts) -> Kind:
    """Nothing went wrong and nothing lapsed: another run got in after the first and the company stayed
    whole (intact), nobody else got in (held), or nobody got anything (not acquired)."""
    got = [r.process for r in facts.rights] + [w.process for w in facts.writes if w.landed]
    if not got:
        return Kind.NOT_ACQUIRED
    # Without any lock nobody "holds": a whole company is intact, whoever wrote it.
    return Kind.INTACT if len(set(got)) > 1 or not facts.rights else Kind.HELD


def detection(ops: list[Op], poller: str, poll: float) -> str | None:
    """How soon a poller saw a killed session's lock free (calibrate): 'within one poll', 'late' (the server
    still held it a full interval after the kill) or 'not detected'; None when no fault struck."""
    kills = [op.time for op in ops if op.f is F.FAULT]
    if not kills:
        return None
    killed, asked, refused, got = kills[0], None, [], None
    for op in (o for o in ops if o.process == poller and o.f is F.ACQUIRE):
        if op.type is Type.INVOKE:
            asked = op.time
        elif op.type is Type.FAIL and asked is not None and asked >= killed:
            refused.append(asked - killed)  # a poll that started after the kill and still found the lock taken
        elif op.type is Type.OK and got is None:
            got = op.time
    return detected_within(None if got is None else got - killed, poll, max(refused) if refused else None)


def search_verdict(counterexample: Verdict | None, struck: int, flaky: bool = False) -> Verdict:
    """A kill-point search as one verdict: its smallest counterexample's (quoting that it is one), or, when every
    schedule that struck passed, held with the count (exercised when any schedule struck)."""
    figures = {"schedules_struck": struck, "flaky": flaky}
    if counterexample is None:
        return Verdict(Kind.HELD, Valid.TRUE, struck > 0, (), figures)
    return Verdict(counterexample.kind, counterexample.lock, True, counterexample.findings,
                   {**figures, "counterexample": True})


def margin_verdict(steps: list[Verdict], shown: int, margin: dict) -> Verdict:
    """A margin search (lab/measures/margin.py) as one verdict: the verdict of the step it shows (the first that broke
    at the smallest broken strength, else its last), quoting the margin; exercised when any step was."""
    chosen = steps[shown]
    return Verdict(chosen.kind, chosen.lock, any(v.exercised for v in steps), chosen.findings,
                   {**chosen.figures, "margin": margin})
