"""The shapes of the measures a trial records and the report reads, as TypedDicts.

A trial's measures are JSON in trials.jsonl, so they stay dicts; these say which keys a writer fills and a
reader may use, and the type checker holds both sides to them. A key a run of an older schema did not
write is NotRequired.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from lab.declarations.described_enum import DescribedStrEnum


class HolderMeasures(TypedDict):
    """What the lease-fault trial's holder did, times from its grant."""

    granted: bool
    token: int | None
    write: str  # committed / rejected / failed / indeterminate / none
    write_resolved: str | None
    write_error: str | None
    write_at: float | None
    held_after: bool | None
    noticed_loss_at: float | None
    release: str | None
    signals: list[dict]  # what its process heard, in order (lab/checkers/told.py)


class ContenderMeasures(TypedDict):
    """What the second run did while the fault held the holder."""

    acquired: bool
    write: str
    granted_at: float | None
    in_at: float | None
    token: NotRequired[int | None]  # the fence token of its grant, where the lock has one


class LeaseFaultMeasures(TypedDict):
    """A lease-fault trial (scenarios/_lease_faults.py): a holder hit mid-hold, a contender, then the write."""

    history: list[dict]  # the trial's operations (lab/checkers/ops.py), judged by lab/checkers/judge.py
    final: dict[str, dict]  # company -> rows and runs it ended with
    fault: str
    point: str  # where the holder stopped: before_write, after_delete
    ttl_s: float
    fault_at: float
    healed_at: float
    holder: HolderMeasures
    contender: ContenderMeasures
    rows: int
    rows_final: int
    runs_in_final: list
    evidence: NotRequired[dict]  # the fault's proof that it struck (lab/faults)


class Promotion(TypedDict):
    """How a failover promoted its new primary and what the old one went on accepting (the contract the managed
    failovers and their scripted controls share; the report sets them side by side from it)."""

    manager: str  # "sentinel 6.2.14", "patroni 4.1.5", "scripted"
    promote_s: float | None  # from the fault until the new primary answered as one (None: not within the trial)
    old_primary_accepted: int  # probe writes acknowledged by the old primary after the fault struck
    old_primary_accepting_s: float | None  # from the fault until its last acknowledged probe write (None: none)
    old_primary_writes_survived: int | None  # of those, how many the primary holds at the end (None: unreadable)


class FailoverMeasures(LeaseFaultMeasures):
    """A trial on servers of its own (scenarios/_failover_trial.py): the lease-fault shape, whether the holder's
    grant was acknowledged, and for a fenced lock whether the next grant reused the holder's token."""

    grant: str  # "acknowledged", or "grant never acknowledged" (the server waited on a replica that never came)
    token_reused: NotRequired[bool]
    promotion: NotRequired[Promotion]  # a failover scenario's, and its scripted control's


class NetDropMeasures(LeaseFaultMeasures):
    """The netdrop trial (scenarios/netdrop.py): the lease-fault shape, when the server's keepalives ended the
    dropped session against the doctor's figure, and what the holder's client learned."""

    keepalive: dict
    client: dict


class LockScope(DescribedStrEnum):
    """Where a lock's cost falls, as its capabilities declare it (Backend.holds_across_writes): what a figure of
    the cost per company includes."""

    EACH_COMPANY = ("each_company", "inside each company's transaction: its lock, claim, retry or nothing at all")
    ONCE_PER_RUN = ("once_per_run", "held across the run's transactions: acquired and released once per run, so "
                                    "each company's transaction carries the write alone, or with its fence upsert")


class CompanyCostArm(TypedDict):
    """One side of a company-cost trial: every company rebuilt in a transaction of its own, on a table of its own."""

    table: str  # its own table, dropped after the trial
    seconds: float  # the timed rebuilds of every company, its blocks summed
    per_company: float  # the median of its blocks' seconds per company
    blocks: list[float]  # each block's seconds, in the order they ran
    block_companies: list[int]  # how many companies each block rebuilt
    transactions: int
    failed: int  # transactions that did not commit
    attempts: int  # transactions tried, retries included (SERIALIZABLE's)
    rows_final: int
    companies_final: int  # after the clock: every company whole, once (the untimed warm-up company included)


class CompanyCostMeasures(TypedDict):
    """A company-cost trial (scenarios/cost_per_company.py): a backend's own write path and the no-lock write on
    the same store, in alternating blocks of companies, with the store's floor sampled between the blocks."""

    companies: int  # timed per side
    filled: int  # companies in each side's table: the timed ones and the untimed warm-up one
    rows: int  # per company
    store: str  # where the writes go (lab/declarations/where.py): postgres, mariadb
    scope: str  # a LockScope value
    fenced: bool  # each write moves a fence first (backends/_fence.py)
    order: list[str]  # "lock" / "baseline", block by block
    pairs: list[float]  # the lock's seconds per company over the control's, in each pair of adjacent blocks
    lock: CompanyCostArm
    baseline: CompanyCostArm
    ratio: float  # the median of the pairs' ratios: paired within the trial
    acquire_s: float | None  # a run-level lock's one acquire, untimed by the figure (latency times it precisely)
    release_s: float | None
    release: str | None  # what a run-level lock's release said: released, or the LockLost it raised
    floors: dict[str, float]  # the write store's floor calls (select 1, one-row commit): median seconds
    floor_samples: int
