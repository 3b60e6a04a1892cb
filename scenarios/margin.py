"""The safety margin of each lease: the largest fault it survived and the smallest that broke it, in TTLs.

Each trial of this scenario is a whole search (lab/measures/margin.py): for one backend and one graded fault,
a bounded bisection over the fault's strength in which every step is a real lease-fault trial
(scenarios/_lease_faults.py) judged by the one set of checkers. The record keeps every step (its strength,
its typed verdict, its history and evidence), so the report computes the bounds again from the run folder
alone and says how many trials each bound rests on.

GRADED lists the faults searched. Adding one (the slow network's delay, say) is one entry: a variant name,
the fault classes tried in order (the first that applies to a backend by its declarations runs; each takes
`strength` in TTLs), its range, a phrase for its unit, and, when its trials are not the lease-fault shape
(a delay inside a network namespace of its own), the function that runs one: `trial(env, fault, step)`
returning measures with the trial's `history` and `final` table, as lease_fault_trial's are, each step with
a table and lock key of its own (`step` is the step's number). Budgets are per profile, in `params`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import backends
from lab.declarations.capabilities import Capability
from lab.checkers import ops
from lab.checkers.judge import margin_verdict
from lab.checkers.outcomes import DoesNotRun
from lab.checkers.verdict import Verdict
from lab.faults import GradedFault, RedlockClockFast, RedlockClockJump, ServerClockFast, ServerClockJump
from lab.faults.slow_network import NetDelay, SlowNetworkFault
from lab.measures.kinds import Measured
from lab.measures.margin import Outcome, Plan, bounds, outcome_of, search
from scenarios._lease_faults import first_applicable, lease_fault_trial
from scenarios.base import Scenario, TrialEnv, judged
from scenarios.slow_network import slow_network_trial


def lease_step(env: TrialEnv, fault: GradedFault, step: int) -> dict:
    """One step as a lease-fault trial (scenarios/_lease_faults.py): a Skip there ends the search as n/a."""
    return dict(lease_fault_trial(env, fault, step=step))


def slow_step(env: TrialEnv, fault: GradedFault, step: int) -> dict:
    """One step inside a private network namespace with servers of its own (scenarios/slow_network.py)."""
    assert isinstance(fault, SlowNetworkFault)  # GRADED gives this trial its delay faults only
    return dict(slow_network_trial(env, fault, step=step))


@dataclass(frozen=True)
class Graded:
    """One fault the margin search runs: which classes, over what range, what its strength means, and how one
    trial of it runs."""

    kinds: tuple[type[GradedFault], ...]
    unit: str  # what one unit of strength is, for the report
    low: float
    high: float
    trial: Callable[[TrialEnv, GradedFault, int], dict] = lease_step


GRADED: dict[str, Graded] = {
    "server_jump": Graded((ServerClockJump, RedlockClockJump), "TTLs the lock server's clock jumps forward (one "
                          "granting master of five for Redlock), the contender asking once at once", 0.0, 1.5),
    "server_fast": Graded((ServerClockFast, RedlockClockFast), "TTLs the lock server's clock gains per TTL (it runs at "
                          "1 + strength times the real rate), the contender asking until 0.9 TTL after the grant",
                          0.0, 4.0),
    "net_delay": Graded((NetDelay,), "TTLs added to every round trip of the holder's lock connection (half each way), "
                        "the contender asking a TTL after the delay began", 0.0, 1.5, slow_step),
}


class Margin(Scenario):
    name = "margin"
    measured = Measured.MARGIN_SEARCH
    summary = ("per lease backend and graded fault (a server clock that jumps or runs fast, a slow lock connection): "
               "the largest strength it survived and the smallest that broke it, in TTLs, by a bisection of real trials")
    requires = frozenset({Capability.LEASE_EXPIRY})
    variants = tuple(GRADED)
    # budget: trials per search; confirm: trials wanted at each bound (as the budget allows); resolution: TTLs.
    params = {
        "quick": {"ttl_s": 1.0, "trials": 1, "parallel": 2, "budget": 4, "confirm": 1, "resolution": 0.25},
        "default": {"ttl_s": 2.0, "trials": 1, "parallel": 3, "budget": 12, "confirm": 2, "resolution": 0.05},
    }

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        fault = first_applicable(GRADED[variant].kinds, backend_cls)()
        reason = fault.applies_to(backend_cls)
        missing = fault.missing() if reason is None else None
        return DoesNotRun(missing) if missing is not None else reason

    def trial_seconds(self, profile: str) -> float:
        p = self.profile_params(profile)
        return p["budget"] * (6.0 + 2 * p["ttl_s"])  # a holder process started and a TTL or two waited per step

    def pg_sessions(self, backend_cls, profile: str) -> int:
        return 3  # one step at a time: its writes, the observer, the contender's write

    def run_trial(self, env: TrialEnv) -> dict:
        graded = GRADED[env.spec.variant]
        cls = backends.load(env.spec.backend)
        kind = first_applicable(graded.kinds, cls)
        p = env.params
        plan = Plan(graded.low, graded.high, p["budget"], p["resolution"], p["confirm"])
        recorded: list[dict] = []

        def run_step(strength: float) -> Outcome:
            measures = graded.trial(env, kind(strength), len(recorded))  # a Skip ends the search
            verdict = judged(measures, cls)
            outcome = outcome_of(verdict, ops.from_json(measures["history"]))  # what the lease did, too
            recorded.append({"strength": strength, "outcome": outcome.value,
                             "judgement": verdict.to_json(), "history": measures.pop("history"),
                             "evidence": measures.get("evidence", {}), "ttl_s": measures["ttl_s"]})
            return outcome

        steps = search(run_step, plan)
        margin = bounds(steps)
        shown = _shown_step(recorded, margin.broke)
        return {"fault": kind.name, "unit": graded.unit, "plan": plan.to_json(), "ttl_s": p["ttl_s"],
                "steps": recorded, "margin": margin.to_json(), "history": recorded[shown]["history"],
                "shown_step": shown, "final": {}}

    def judge(self, measures: dict, backend_cls) -> Verdict:
        """The search as one verdict: its steps' verdicts composed (lab/checkers/judge.py), the margin quoted."""
        return margin_verdict([Verdict.from_json(s["judgement"]) for s in measures["steps"]],
                              measures["shown_step"], measures["margin"])


def _shown_step(recorded: list[dict], broke: float | None) -> int:
    """The step whose history the record keeps as its own: the first that broke at the smallest broken strength,
    else the last step."""
    for i, step in enumerate(recorded):
        if broke is not None and step["strength"] == broke and step["outcome"] == Outcome.BROKE.value:
            return i
    return len(recorded) - 1
