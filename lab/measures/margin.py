"""How much of a fault a lease survives: a bounded bisection over the fault's strength, each step a real trial.

Why: no lock library publishes the figure an engineer sizing a TTL needs, the largest error (a server's
clock jumping, a slow network) its lease survived and the smallest that broke it, as a share of the TTL.
The lab measures it by running the same trial at chosen strengths of one fault and bisecting between the
largest strength that survived and the smallest that broke.

The interface, for any fault whose size is one number:

- A *graded fault* is a `lab.faults.base.Fault` whose constructor takes `strength: float`, its size in
  TTLs of the lease: `ServerClockJump(strength=0.5)` moves the lock server's clock half a TTL ahead,
  `ServerClockFast(strength=1.0)` runs it at twice the real rate. A delay fault fits the same way: hold
  each packet of the holder's lock connection strength x TTL.
- A *step* is one real trial of that fault at one strength, judged by the one set of checkers
  (lab/checkers/judge.py): `outcome_of(verdict, history)` is the one rule that calls it survived or broke. A step
  broke when the checkers found the lock held by two at once (`verdict.lock` false), the company
  unsafe, or the lease taken from its holder (its write refused by a fence or rolled back). It survived only
  when they found none of these and the holder's lease demonstrably held (lab/checkers/lease.py: its renewal or
  release succeeded, or its server said it held, and nothing of its own said it was gone). A lease visibly gone
  that nobody else took (a renewal failed, the release raised) is *lapsed*: neither survived nor broke. A lapsed
  step, like an unknown one (an indeterminate commit, a holder that never got the lock, a lease nothing showed
  either way), ends the search where it is.
- `search(run_step, plan)` runs steps, each `run_step(strength)` returning an Outcome, within
  `plan.budget` trials: the top of the range first (a lease that survives it has no broken bound in the
  range), then the bottom (one that breaks there breaks without the fault, or at its least), then
  bisection until the bounds are `plan.resolution` apart, then more trials at each bound until it rests on
  `plan.confirm` (a repeat that disagrees moves the bound, and the bisection goes on between the new
  bounds) while the budget lasts. It returns the steps; `bounds(steps)` turns any steps into a `Margin`.
  A breaking point rests on BREAKS_NEEDED broken trials at its strength; one that rests on fewer says so
  (`Margin.confidence`: the report writes "1 of 2").
  The report computes the margin again from the steps a run recorded, so a figure never rests on a
  summary the scenario wrote.

To search another graded fault, add it to scenarios/margin.py's GRADED: its variant name, the fault classes
tried in order (the first that applies to a backend by its declarations runs), its range, its unit in words,
and, when its trials are not the lease-fault shape, the function that runs one step and returns measures with
a `history` and a `final` table (`trial(env, fault, step)`). The report then renders its margins with the
rest, from the run's folder alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Callable, Iterable

from lab.checkers.lease import lease_held
from lab.checkers.ops import Op
from lab.checkers.outcomes import Safety
from lab.checkers.verdict import Kind, Valid, Verdict

PLACES = 4  # strengths are rounded to this many decimals, so that a repeated strength is the same key
BREAKS_NEEDED = 2  # broken trials at a strength before it is a confirmed breaking point


class Outcome(str, Enum):
    """What one step showed, from the checkers' typed verdict and what the holder's lease did."""

    SURVIVED = "survived"  # nobody else got in, and the holder's lease demonstrably held
    BROKE = "broke"
    LAPSED = "lapsed"  # the lease was visibly gone (a renewal failed, the release raised), but nobody else took it
    UNKNOWN = "unknown"


class Confidence(str, Enum):
    """What a breaking point rests on."""

    CONFIRMED = "confirmed"  # BREAKS_NEEDED broken trials or more at its strength
    SHORT = "short"  # fewer: one broken trial where a breaking point needs two ("1 of 2")


# The lease was taken from its holder although the company stayed whole: a fence refused, or a transaction rolled
# back, the lapsed holder's write. The lease broke; what saved the company is the kind the table quotes.
TAKEN_AWAY = frozenset({Kind.STALE_WRITE_REJECTED, Kind.ROLLED_BACK})


_LEASE = {Valid.TRUE: Outcome.SURVIVED, Valid.FALSE: Outcome.LAPSED, Valid.UNKNOWN: Outcome.UNKNOWN}


def outcome_of(verdict: Verdict, history: list[Op]) -> Outcome:
    """Broke: the lock was held by two at once, the company was left unsafe, or the lease was taken from its holder
    (a contender granted, the holder's write refused by the fence or rolled back). Otherwise what the holder's lease
    did (lab/checkers/lease.py, over the step's history): survived where it demonstrably held, lapsed where it was
    visibly gone, unknown where nothing shows either. Unknown too: a commit nobody can resolve, or a holder that
    never held."""
    if verdict.lock is Valid.FALSE or verdict.safety is Safety.UNSAFE or verdict.kind in TAKEN_AWAY:
        return Outcome.BROKE
    if verdict.safety is Safety.UNKNOWN or verdict.kind is Kind.NOT_ACQUIRED:
        return Outcome.UNKNOWN
    return _LEASE[lease_held(history).valid]


@dataclass(frozen=True)
class Step:
    """One trial of the search: its strength (TTLs) and its outcome."""

    strength: float
    outcome: Outcome


@dataclass(frozen=True)
class Plan:
    """A search's range (TTLs), its budget of trials, the gap at which it stops, and the trials it wants at each
    bound."""

    low: float
    high: float
    budget: int
    resolution: float
    confirm: int = 1

    def __post_init__(self) -> None:
        if not (self.low < self.high and self.budget >= 2 and self.resolution > 0 and self.confirm >= 1):
            raise ValueError(f"not a search plan: {self}")

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Margin:
    """What a search's steps say: the largest strength that survived every trial at it below the smallest that broke
    any, the trials behind each (and how many of those at the broken one broke), any strength that survived above a
    broken one (the lease is not monotone in this fault there, or a trial was noisy: the report says so instead of a
    clean figure), and the strengths where a step was unknown or its lease lapsed with nobody taking it."""

    survived: float | None
    broke: float | None
    survived_trials: int
    broke_trials: int
    trials: int
    contradictions: tuple[float, ...] = ()
    unknown: tuple[float, ...] = ()
    breaks: int = 0  # the trials that broke at `broke`
    lapsed: tuple[float, ...] = ()

    @property
    def gap(self) -> float | None:
        if self.survived is None or self.broke is None:
            return None
        return round(self.broke - self.survived, PLACES)

    @property
    def confidence(self) -> Confidence | None:
        """Whether the breaking point rests on the broken trials it needs (None: no breaking point)."""
        if self.broke is None:
            return None
        return Confidence.CONFIRMED if self.breaks >= BREAKS_NEEDED else Confidence.SHORT

    def to_json(self) -> dict:
        confidence = self.confidence
        return {**asdict(self), "contradictions": list(self.contradictions), "unknown": list(self.unknown),
                "lapsed": list(self.lapsed), "breaks_needed": BREAKS_NEEDED,
                "confidence": None if confidence is None else confidence.value}


def bounds(steps: Iterable[Step]) -> Margin:
    """The margin any list of steps shows (the search's own, or what a run recorded)."""
    at: dict[float, list[Outcome]] = {}
    for step in steps:
        at.setdefault(round(step.strength, PLACES), []).append(step.outcome)
    broken = sorted(s for s, outcomes in at.items() if Outcome.BROKE in outcomes)
    clean = sorted(s for s, outcomes in at.items() if all(o is Outcome.SURVIVED for o in outcomes))
    broke = broken[0] if broken else None
    below = [s for s in clean if broke is None or s < broke]
    survived = below[-1] if below else None
    return Margin(survived, broke, len(at[survived]) if survived is not None else 0,
                  len(at[broke]) if broke is not None else 0, sum(len(o) for o in at.values()),
                  tuple(s for s in clean if broke is not None and s > broke),
                  tuple(sorted(s for s, outcomes in at.items() if Outcome.UNKNOWN in outcomes)),
                  at[broke].count(Outcome.BROKE) if broke is not None else 0,
                  tuple(sorted(s for s, outcomes in at.items() if Outcome.LAPSED in outcomes)))


def search(run_step: Callable[[float], Outcome], plan: Plan) -> list[Step]:
    """Bisect the plan's range with real trials (run_step), within its budget; the steps in the order run."""
    steps: list[Step] = []

    def run(strength: float) -> Outcome:
        strength = round(strength, PLACES)
        outcome = run_step(strength)
        steps.append(Step(strength, outcome))
        return outcome

    top = run(plan.high)
    if top is not Outcome.BROKE:
        return steps  # survived the whole range (or lapsed or unknown there): nothing below it to bisect towards
    bottom = run(plan.low)
    if bottom is not Outcome.SURVIVED:
        return steps  # broke at the least strength asked (or lapsed, or unknown)
    reserve = 2 * (plan.confirm - 1)  # the trials kept for confirming both bounds
    low, high = plan.low, plan.high
    while True:
        while len(steps) < plan.budget - reserve and high - low > plan.resolution:
            middle = (low + high) / 2
            outcome = run(middle)
            if outcome not in (Outcome.BROKE, Outcome.SURVIVED):
                return steps  # lapsed or unknown: nothing to bisect on; the steps so far stand as they are
            low, high = (low, middle) if outcome is Outcome.BROKE else (middle, high)
        for strength in (high, low):  # each bound up to plan.confirm trials, the broken one first
            while sum(s.strength == round(strength, PLACES) for s in steps) < plan.confirm and len(steps) < plan.budget:
                if run(strength) is not (Outcome.BROKE if strength == high else Outcome.SURVIVED):
                    break
        margin = bounds(steps)
        if (margin.survived, margin.broke) == (round(low, PLACES), round(high, PLACES)) or margin.survived is None \
                or margin.broke is None or len(steps) >= plan.budget or margin.unknown or margin.lapsed:
            return steps
        low, high = margin.survived, margin.broke  # a confirmation flipped a bound: bisect between the new ones
