"""What a lock costs per company, as the decision reads it: one typed figure per backend from the company-cost trials.

Each company-cost trial (Measured.COMPANY_COST) times a backend's own write path beside the no-lock control on the
same store, in alternating blocks, and records their paired ratio (scenarios/cost_per_company.py). This module turns
a backend's trials into one CompanyCost: its seconds per company and its ratio to no lock, each a median with
min-max over the repetitions, and the store's floor. It reads the run's frame only, so the decision
(lab/report/decide.py) and the report's section (lab/report/company_cost_table.py) read the same figure.

Two costs compare only by their paired ratios (`cheaper`): the seconds of two backends were timed minutes apart on a
shared machine, their ratios each against the control beside them. A difference their ranges overlap on is a tie.
The no-lock control is timed too, against itself: its ratios are the method's own spread in the run, and a lock whose
range overlaps them adds nothing the run can tell from no lock (`within_noise`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import pandas as pd

from lab.measures.kinds import Measured
from lab.measures.shapes import CompanyCostMeasures, LockScope
from lab.report.common import ok_trials, ordered_backends

ROUND_TRIP, ONE_ROW_COMMIT = "select 1", "one-row commit"  # the floor calls a SQL store's probe times
SCOPES = {scope.value: scope for scope in LockScope}  # as a trial records it


@dataclass(frozen=True)
class CompanyCost:
    """A backend's measured cost per company: its write path against the no-lock control beside it."""

    backend: str
    store: str  # where its writes go: postgres, mariadb
    scope: LockScope  # inside each company's transaction, or held once per run (then the write alone is timed)
    fenced: bool  # each write moves its fence first
    seconds: float  # median over repetitions of its seconds per company
    seconds_low: float
    seconds_high: float
    baseline_seconds: float  # the same, for the no-lock control in the same trials
    ratio: float  # median over repetitions of its paired ratio to the control
    ratio_low: float
    ratio_high: float
    companies: int  # per side, per trial
    repetitions: int
    retries: int  # transactions run again (SERIALIZABLE's), over every repetition
    releases_raised: int  # repetitions whose run-level lock raised LockLost at its release, after the timed writes
    round_trip: float | None  # the store's select 1, median seconds over its trials (None: not sampled)
    commit: float | None  # the store's one-row commit, likewise

    @property
    def company_seconds(self) -> tuple[float, int, int]:
        """The contract of lab/report/decide.company_seconds: (median seconds per company, companies, repetitions)."""
        return self.seconds, self.companies, self.repetitions

    def within_noise(self, control: CompanyCost | None = None) -> bool:
        """Whether no lock may cost as much, as far as its ratios tell: their range holds 1, or overlaps the range of
        the control timed against itself on the same store (the method's own spread in this run, where it ran)."""
        if self.ratio_low <= 1.0 <= self.ratio_high:
            return True
        return control is not None and control.store == self.store and cheaper(self, control) is None

    @property
    def added_seconds(self) -> float:
        """What its write path adds per company over no lock: the control's median times (ratio - 1)."""
        return self.baseline_seconds * (self.ratio - 1.0)


def company_cost(frame: pd.DataFrame, backend: str) -> CompanyCost | None:
    """A backend's cost per company from this run's company-cost trials, or None when the run did not time it (or
    every trial of it failed a transaction: a figure of writes that did not happen is no cost)."""
    rows = ok_trials(frame, Measured.COMPANY_COST)
    measures: list[CompanyCostMeasures] = [m for m in rows[rows.backend == backend].measures if _whole(m)]
    if not measures:
        return None
    seconds = [m["lock"]["per_company"] for m in measures]
    ratios = [m["ratio"] for m in measures]
    first = measures[0]
    return CompanyCost(
        backend=backend, store=first["store"], scope=SCOPES[first["scope"]], fenced=first["fenced"],
        seconds=statistics.median(seconds), seconds_low=min(seconds), seconds_high=max(seconds),
        baseline_seconds=statistics.median(m["baseline"]["per_company"] for m in measures),
        ratio=statistics.median(ratios), ratio_low=min(ratios), ratio_high=max(ratios),
        companies=first["companies"], repetitions=len(measures),
        retries=sum(m["lock"]["attempts"] - m["lock"]["transactions"] for m in measures),
        releases_raised=sum(m["release"] not in (None, "released") for m in measures),
        round_trip=_floor(measures, ROUND_TRIP), commit=_floor(measures, ONE_ROW_COMMIT))


def company_costs(frame: pd.DataFrame) -> dict[str, CompanyCost]:
    """Every backend's cost per company that this run measured, in the run's order."""
    rows = ok_trials(frame, Measured.COMPANY_COST)
    found = {backend: company_cost(frame, backend) for backend in ordered_backends(rows)}
    return {backend: cost for backend, cost in found.items() if cost is not None}


def cheaper(a: CompanyCost, b: CompanyCost) -> CompanyCost | None:
    """The cheaper of two by their ratios to the control beside each: the one whose every ratio lies below the
    other's every ratio; None when their ranges overlap (a tie within noise) or they write to different stores."""
    if a.store != b.store:
        return None
    if a.ratio_high < b.ratio_low:
        return a
    if b.ratio_high < a.ratio_low:
        return b
    return None


def _whole(m: CompanyCostMeasures) -> bool:
    """Every transaction of both sides committed and left every company whole, once."""
    whole = (m["filled"], m["filled"] * m["rows"])
    return all(arm["failed"] == 0 and (arm["companies_final"], arm["rows_final"]) == whole
               for arm in (m["lock"], m["baseline"]))


def _floor(measures: list[CompanyCostMeasures], call: str) -> float | None:
    values = [m["floors"][call] for m in measures if call in m["floors"]]
    return statistics.median(values) if values else None
