"""The runner's pacing: from a scenario's declared Pacing (lab/declarations/pacing.py), its estimates, bounds and which trials run.

Why here: pacing is the runner's job. A scenario declares its lane, floor, exclusivity and repetitions as one
value and keeps only the hooks that read its own parameters or measures (trial_seconds, wall_budget,
measured_seconds, parallelism, pg_sessions, variant_trials, and the ones its declaration names); everything
computed from them (the sequential rule, the floors, the lower bounds, the estimates) lives in this module.
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.checkers.outcomes import Safety
from lab.declarations.pacing import Exclusive, Floor, Repeats
from scenarios.base import FaultReach, Scenario, TrialSpec

# The timers a trial sits through at least once, by the names the profiles give them: a lease waited out
# (ttl_s), a guard's timeout fired (timeout_s), a transaction held open (hold_s), a kill at its moment
# (kill_at), a run's work (work_s). Ceilings (give_up, wait_for_run2_s, shrink_s) bound a wait from above.
FLOOR_TIMERS = ("ttl_s", "timeout_s", "hold_s", "kill_at", "work_s")


def cell_records(spec: TrialSpec, done: list[dict]) -> list[dict]:
    """The finished ok records of a planned trial's cell: its scenario, backend (with driver) and variant."""
    return [r for r in done if r.get("scenario") == spec.scenario and r.get("backend") == spec.label
            and r.get("variant") == spec.variant and r.get("status") == "ok"]


def settled(records: list[dict]) -> bool:
    """Whether a cell's trials so far settle its verdict: one failed (a failure found stands), or every trial showed
    the same kind with the same exercised answer. Trials that differ leave it unsettled: more of them say how
    often each outcome comes, and raise the count behind a ✓."""
    if any(r.get("safety") == Safety.UNSAFE.value for r in records):
        return True
    outcomes = {((r.get("judgement") or {}).get("kind", r.get("verdict")), r.get("exercised")) for r in records}
    return len(outcomes) <= 1


def makespan_floor(floors: Sequence[float], costs: Sequence[int], at_once: int, sessions: int | None) -> float:
    """The least wall time in which trials lasting at least `floors` seconds can all finish, at most `at_once`
    running together and, with `sessions`, their PostgreSQL sessions (`costs`) never over that budget.

    Three things no schedule escapes: the longest trial; the trials' seconds shared among at_once workers;
    and their session-seconds shared within the budget (a trial holds its sessions for all of its time)."""
    if not floors:
        return 0.0
    bound = max(max(floors), sum(floors) / max(1, at_once))
    if sessions:
        bound = max(bound, sum(min(c, sessions) * f for c, f in zip(costs, floors)) / sessions)
    return bound


def trial_floor(scenario: Scenario, profile: str) -> float:
    """Seconds one trial cannot take less than, as declared (Pacing.floor): by default the profile's timers a trial
    sits through once (FLOOR_TIMERS). After the run a trial seen to wait longer on its timers counts that
    (TrialEnv.waited), and one that ended sooner than this (a backend that let the contender in at once) counts its
    own duration (lab/runner/trials.py finished_floor), so the bound never claims more than happened."""
    floor = scenario.pacing.floor
    if floor is Floor.NONE:
        return 0.0
    if floor is Floor.OWN:
        return scenario.own_floor(profile)
    p = scenario.profile_params(profile)
    return sum(float(p.get(name, 0)) for name in FLOOR_TIMERS)


def exclusive(scenario: Scenario, spec: TrialSpec, services) -> bool:
    """Whether this trial must run with none of the scenario's other trials beside it (Pacing.exclusive): the
    runner starts it only when nothing else of the scenario runs, and nothing beside it."""
    return scenario.pacing.exclusive is Exclusive.PER_TRIAL and scenario.exclusive(spec, services)


def estimate_seconds(scenario: Scenario, profile: str, trials: int, at_once: int, alone: int = 0) -> float:
    """About how long trials trials take, at_once at a time, `alone` of them one after another (exclusive());
    a scenario with a wall budget takes that."""
    budget = scenario.wall_budget(profile)
    if budget is not None:
        return budget
    together = max(0, trials - alone)
    return (alone + -(-together // max(1, at_once))) * scenario.trial_seconds(profile)


def floor_trials(scenario: Scenario, profile: str, variant: str) -> int:
    """The trials every cell of a variant runs before the sequential rule may add more."""
    return scenario.variant_trials(variant, scenario.profile_params(profile)["trials"])


def needed(scenario: Scenario, profile: str, spec: TrialSpec, done: list[dict]) -> bool:
    """Whether a planned trial must still run, given the ok records of the trials finished so far. A scenario that
    repeats until precise enough (Repeats.UNTIL_PRECISE) says so itself (Scenario.still_needed); otherwise every
    trial of the profile's count runs, and one of the sequential rule's extra trials only while its cell is
    unsettled (settled())."""
    if scenario.pacing.repeats is Repeats.UNTIL_PRECISE:
        return scenario.still_needed(profile, spec, done)
    floor = floor_trials(scenario, profile, spec.variant)
    if spec.index < floor:
        return True
    records = cell_records(spec, done)
    return len(records) < floor or not settled(records)  # undecided until the cell's first trials are in


def later(scenario: Scenario, profile: str, spec: TrialSpec, finished: int) -> bool:
    """Whether a trial must wait before it starts: one of the sequential rule's extra trials waits until its
    cell's first `floor_trials` have finished (any status), since only they tell whether it is needed."""
    return spec.index >= floor_trials(scenario, profile, spec.variant) and finished < floor_trials(
        scenario, profile, spec.variant)


def reads_finished(scenario: Scenario) -> bool:
    """Whether the runner must hand needed() the finished records: it stops early by precision, or the
    sequential rule may add trials."""
    pacing = scenario.pacing
    return pacing.repeats is Repeats.UNTIL_PRECISE or (pacing.extra_trials_when_varied > 0
                                                       and scenario.fault_reach is FaultReach.ONE_TRIAL)


def at_once(scenario: Scenario, profile: str, costs: Sequence[int], sessions: int | None) -> int:
    """The most trials that can run together: parallelism(), and no more than fit in the sessions the
    server allows the scenario (lab/runner/waves.py), the cheapest first."""
    limit = max(1, scenario.parallelism(profile))
    if sessions is None:
        return limit
    fits, used = 0, 0
    for cost in sorted(costs):
        if fits == limit or used + min(cost, sessions) > sessions:
            break
        fits, used = fits + 1, used + min(cost, sessions)
    return max(1, fits)


def lower_bound(scenario: Scenario, profile: str, floors: Sequence[float], costs: Sequence[int],
                sessions: int | None = None, alone: Sequence[bool] = ()) -> float:
    """The wall time no scheduler could beat for trials whose floors are given (each at least its declared
    trial_floor's part it really waited, plus its measured_seconds), under the scenario's declarations:
    the trials that run alone (`alone`, from exclusive()) one after another, the others as many at once as
    at_once() allows and their sessions within the budget (makespan_floor).

    Before a run the floors are trial_floor() for every runnable trial (declared_bound); after it, each
    finished trial's own, so a scenario gets a bound from what it already declares and its trials do."""
    alone = list(alone) or [False] * len(floors)
    one_by_one = sum(floor for floor, by_itself in zip(floors, alone) if by_itself)
    together = [(floor, cost) for floor, cost, by_itself in zip(floors, costs, alone) if not by_itself]
    shared_costs = [cost for _, cost in together]
    return one_by_one + makespan_floor([floor for floor, _ in together], shared_costs,
                                       at_once(scenario, profile, shared_costs or costs, sessions), sessions)


def declared_bound(scenario: Scenario, profile: str, costs: Sequence[int], sessions: int | None = None,
                   alone: Sequence[bool] = ()) -> float:
    """lower_bound() from the declarations alone: every runnable trial lasting its trial_floor, and no less
    than the scenario's own wall budget (the window that must be waited out once)."""
    floor = trial_floor(scenario, profile)
    bound = lower_bound(scenario, profile, [floor] * len(costs), costs, sessions, alone)
    return max(bound, scenario.wall_budget(profile) or 0.0) if costs else 0.0
