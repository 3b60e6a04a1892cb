"""The shapes of the measures a trial records and the report reads, as TypedDicts.

A trial's measures are JSON in trials.jsonl, so they stay dicts; these say which keys a writer fills and a
reader may use, and the type checker holds both sides to them. A key a run of an older schema did not
write is NotRequired.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


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
