"""When a cell that decides (or flipped) has trials enough: its stopping rule, and where it stands against it.

After its planned trials a run may add trials to the cells whose answer depends on them (lab/runner/settle.py).
Which cells is the decision's to say (lab/runner/settle_cells.py); how many trials each one then needs is this
module's, a pure function of the cell's trial records, so the rounds, the budget, resume and progress all read one
rule and the fast tests can plant any tally:

- a *deciding* cell stops at its first failure (it is ✗) or once its ✓ reaches the declared bound, the 95 %
  Clopper-Pearson upper bound of its per-trial failure rate at most 14 %: 20 exercised trials, none failed. A trial
  whose fault did not take the right away (not exercised) does not count toward the bound;
- a *flipped* cell (its mark differs from a previous reference's) runs 20 finished trials whatever they show, so
  its failure rate is stated on 20 trials (a ✗ 4/20 reads 95 %: 6-44 %), not stopped at its first failure;
- a cell that is both runs until both hold; every cell stops at AT_MOST trials in all (planned ones, errors and
  skips included), and a deciding cell whose fault took the right away in none of IDLE_AFTER finished trials stops
  too: with an exercised rate of 26 % or more, ten idle trials in a row happen less than 5 % of the time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum, Flag, auto

from lab.checkers.outcomes import Safety, exercised_of, judgement_of
from lab.checkers.verdict import Kind
from lab.decision.harm import Harm, safety_for

CONFIDENCE = 0.95
# The declared bound (DESIGN.md, "Strength"): a ✓ is strong at a 95 % upper bound of 14 % or less.
SETTLED_BOUND = 0.14
RATE_TRIALS = 20  # a flipped cell's finished trials: its failure rate is stated on this many
AT_MOST = 40  # trials a cell may have in all (twice the bound's 20): past it, it stops wherever it stands
IDLE_AFTER = 10  # finished trials without one exercised after which a deciding cell stops (0.74^10 < 5 %)


def clean_bound(exercised: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided Clopper-Pearson upper bound of a failure rate after `exercised` trials, none failed: 1 - (1 -
    confidence)^(1/n), 95 % after 1, 63 % after 3, 13.9 % after 20 (1.0 for none)."""
    return 1.0 if exercised <= 0 else 1 - (1 - confidence) ** (1 / exercised)


def trials_for_bound(bound: float = SETTLED_BOUND, confidence: float = CONFIDENCE) -> int:
    """The fewest exercised trials, none failed, whose clean_bound is at most `bound`: 20 for 14 %."""
    return math.ceil(math.log(1 - confidence) / math.log(1 - bound) - 1e-9)


class Why(Flag):
    """Why a cell is settled: it decides a need (every candidate under a fault that failed any of them), its mark
    differs from a previous reference's, or both (DECIDING | FLIPPED)."""

    DECIDING = auto()
    FLIPPED = auto()

    def names(self) -> list[str]:
        """['deciding', 'flipped'], as meta.json keeps it."""
        return [member.name.lower() for member in Why if member in self and member.name]


def failed(record: dict, harm: Harm) -> bool:
    """Whether a finished trial failed its cell under `harm` (lab/decision/harm.py), from the checkers' typed verdict
    (never its words): unsafe for the harm, or a lock lost while its holder, granted the right, believed it held
    (⚠). A store's loss the control shares reads ◆ on the page; here, seeing one cell alone, it stops the cell as a
    failure would."""
    safety = safety_for(record, harm)
    if safety is Safety.UNSAFE:
        return True
    judgement = judgement_of(record)
    granted = judgement is None or judgement.get("kind") != Kind.NOT_ACQUIRED.value
    return safety is Safety.UNTESTED and granted


@dataclass(frozen=True)
class Tally:
    """A cell's trials as its rule counts them: finished (ok), exercised among them, failed among them, and those
    that broke or did not run (an added trial that turned out not to run here: it settles nothing)."""

    finished: int = 0
    exercised: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0

    @classmethod
    def of(cls, records: list[dict], harm: Harm = Harm.SURVIVING_COMPANY) -> Tally:
        """From a cell's records, one per trial id (its latest)."""
        ok = [r for r in records if r.get("status") == "ok"]
        return cls(len(ok), sum(exercised_of(r) is True for r in ok), sum(failed(r, harm) for r in ok),
                   sum(r.get("status") == "error" for r in records), sum(r.get("status") == "skipped" for r in records))

    @property
    def trials(self) -> int:
        """Every trial the cell had, errors and skips included: what AT_MOST counts."""
        return self.finished + self.errors + self.skipped

    def bound(self) -> float | None:
        """A clean cell's 95 % upper bound over its exercised trials; None once a trial failed (it states a rate)."""
        return None if self.failures else clean_bound(self.exercised)

    def standing(self) -> str:
        """Where the cell stands, in a few words: '≤45% (5 of 20 exercised)', '✗ 2/9', '○ 0 of 6 exercised'."""
        if self.failures:
            return f"✗ {self.failures}/{self.finished}"
        if not self.exercised:
            return f"○ 0 of {self.finished} exercised"
        return f"≤{clean_bound(self.exercised) * 100:.0f}% ({self.exercised} of {trials_for_bound()} exercised)"


class Ended(Enum):
    """How a cell's settling ended."""

    FAILURE_FOUND = "failure found"  # a deciding cell's first failure: it is ✗
    BOUND_REACHED = "bound reached"  # a ✓ at the declared bound
    RATE_STATED = "rate stated"  # a flipped cell's RATE_TRIALS finished trials
    AT_MOST = "at most reached"  # AT_MOST trials in all, the rule unmet
    NEVER_EXERCISED = "never exercised"  # IDLE_AFTER finished trials, none exercised
    BUDGET = "budget spent"  # the run's time budget ran out first (the runner's, never the rule's)


@dataclass(frozen=True)
class StopRule:
    """How many trials a cell needs: the clean trials of the bound, a rate's finished trials, or both.

    stop_at_failure: a failure settles the cell (a deciding one that does not also state a rate)."""

    stop_at_failure: bool
    clean: int  # exercised trials with no failure that settle a ✓; 0: none asked
    finished: int  # finished trials that state a rate; 0: none asked
    at_most: int = AT_MOST
    idle_after: int = 0  # 0: a cell never exercised runs on to its other limits

    @classmethod
    def for_(cls, why: Why) -> StopRule:
        """The rule of a deciding cell, of a flipped one, or of one that is both (each limit the stricter)."""
        deciding, flipped = Why.DECIDING in why, Why.FLIPPED in why
        return cls(stop_at_failure=deciding and not flipped, clean=trials_for_bound() if deciding else 0,
                   finished=RATE_TRIALS if flipped else 0, idle_after=0 if flipped else IDLE_AFTER)

    def ended(self, tally: Tally) -> Ended | None:
        """How the cell's settling ended by this rule, or None while it needs more trials."""
        if tally.failures and self.stop_at_failure:
            return Ended.FAILURE_FOUND
        if tally.failures and tally.finished >= self.finished:
            return Ended.RATE_STATED
        if not tally.failures and tally.exercised >= self.clean and tally.finished >= self.finished:
            return Ended.RATE_STATED if self.finished and not self.clean else Ended.BOUND_REACHED
        if tally.trials >= self.at_most:
            return Ended.AT_MOST
        if self.idle_after and tally.finished >= self.idle_after and not tally.exercised:
            return Ended.NEVER_EXERCISED
        return None

    def wanted(self, tally: Tally) -> int:
        """The trials a round gives the cell: the fewest that could meet the rule if each goes the cell's usual way
        (exercised as often as its trials so far were), at least one, never past at_most; 0 once it ended."""
        if self.ended(tally) is not None:
            return 0
        need = max(0, self.finished - tally.finished)
        if self.clean and not tally.failures:
            short = self.clean - tally.exercised
            if tally.exercised:  # the cell's exercised share so far says how many trials that takes
                short = math.ceil(short * tally.finished / tally.exercised)
            elif self.idle_after:
                short = max(1, self.idle_after - tally.finished)
            need = max(need, short)
        return max(1, min(need, self.at_most - tally.trials))

    def describe(self) -> str:
        """The rule in words, for meta.json and the report."""
        parts = []
        if self.clean:
            parts.append(f"until {self.clean} exercised trials with none failed (95 % bound ≤ "
                         f"{clean_bound(self.clean) * 100:.1f} %)")
        if self.stop_at_failure:
            parts.append("or its first failure")
        if self.finished:
            parts.append(f"{'and ' if self.clean else 'until '}{self.finished} finished trials, to state its rate")
        parts.append(f"at most {self.at_most} trials in all")
        if self.idle_after:
            parts.append(f"stopping after {self.idle_after} finished trials none of which was exercised")
        return ", ".join(parts)


@dataclass(frozen=True)
class SettleTarget:
    """One cell to settle: a backend (its row's label, with its driver) under one fault column (a scenario's
    variant), why, its rule, and the harm its trials are judged on."""

    scenario: str
    variant: str
    backend: str
    why: Why
    rule: StopRule
    harm: Harm = Harm.SURVIVING_COMPANY

    @classmethod
    def of(cls, scenario: str, variant: str, backend: str, why: Why, harm: Harm = Harm.SURVIVING_COMPANY) -> SettleTarget:
        """A target with the rule its reasons give (StopRule.for_)."""
        return cls(scenario, variant, backend, why, StopRule.for_(why), harm)

    @property
    def cell(self) -> tuple[str, str, str]:
        """(scenario, backend, variant): how the runner and the records name a cell."""
        return self.scenario, self.backend, self.variant
