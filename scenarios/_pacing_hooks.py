"""What the runner reads from a scenario to pace its trials (lab/runner/pacing.py): the declared Pacing, the hooks
that declaration names, and the estimates' inputs from the scenario's profiles. Scenario (scenarios/base.py) is one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from backends.base import Backend
from lab.declarations.pacing import Exclusive, Floor, Pacing, Repeats

if TYPE_CHECKING:
    from scenarios.trial import TrialSpec


class PacingHooks:
    """A scenario's side of its pacing: a scenario overrides the hooks its Pacing names and the estimates' inputs
    whose defaults do not fit its trials; the runner computes the rest (lab/runner/pacing.py)."""

    name: ClassVar[str]  # the scenario's, as its hooks' errors name it
    params: ClassVar[dict[str, dict]]  # profile -> parameters; 'full' falls back to 'default'
    # How its trials are paced (lab/declarations/pacing.py): its lane, floor, exclusivity and repetitions, one value the runner
    # reads (lab/runner/pacing.py). What it names as the scenario's own is a hook below (own_floor, exclusive,
    # still_needed); a class that defines one of those hooks declares it, or the class is refused when defined.
    pacing: ClassVar[Pacing] = Pacing()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for hook, declared in (("own_floor", cls.pacing.floor is Floor.OWN),
                               ("exclusive", cls.pacing.exclusive is Exclusive.PER_TRIAL),
                               ("still_needed", cls.pacing.repeats is Repeats.UNTIL_PRECISE)):
            if (getattr(cls, hook) is not getattr(PacingHooks, hook)) != declared:
                raise TypeError(f"{cls.__name__}: its pacing and its {hook}() disagree: a scenario declares the "
                                f"hooks it defines (lab/declarations/pacing.py), and defines the ones it declares")

    def profile_params(self, profile: str) -> dict:
        return dict(self.params.get(profile) or self.params["default"])

    def variant_trials(self, variant: str, trials: int) -> int:
        """How many trials a cell of this variant runs, given the profile's count: that count, unless the
        variant's own repetitions already measure what more trials would (whynot's throughput)."""
        return trials

    def trial_seconds(self, profile: str) -> float:
        """About how long one trial takes, from the profile's timers (a TTL waited out twice, a guard's
        timeout and the probe after it, a hold): what the progress estimate multiplies. A scenario whose
        trials last otherwise says so."""
        p = self.profile_params(profile)
        return (1.0 + 2 * p.get("ttl_s", 0) + p.get("timeout_s", 0) * 5 / 3 + p.get("hold_s", 0)
                + p.get("kill_at", 0) + p.get("give_up", 0) + p.get("work_s", 0))

    def wall_budget(self, profile: str) -> float | None:
        """Seconds the whole scenario should take when its trials overlap (None: no such bound)."""
        return None

    def measured_seconds(self, measures: dict) -> float:
        """Seconds of a finished trial spent inside its own measurement (a timed rebuild, a throughput window):
        work a scheduler cannot shorten without changing the figure. 0 for a trial that times nothing; a
        scenario whose trials time work says how much from their measures."""
        return 0.0

    def precision(self, profile: str, done: list[dict]) -> dict | None:
        """What the run records about how its repetitions ended (the rule's outcome), for the report; None: nothing."""
        return None

    def exclusive(self, spec: TrialSpec, services) -> bool:
        """Pacing(exclusive=Exclusive.PER_TRIAL): whether this trial must run with none of the scenario's other
        trials beside it: it acts on a server they share (a restart of the run's PostgreSQL reaches every session
        on it), or times what they would skew."""
        raise NotImplementedError(f"{self.name} declares no exclusive trials")

    def own_floor(self, profile: str) -> float:
        """Pacing(floor=Floor.OWN): seconds one trial cannot take less than, from the scenario's own parameters,
        for a scenario whose trials wait on timers other than the profile's (a server's keepalives)."""
        raise NotImplementedError(f"{self.name} declares its floor from the profile's timers")

    def still_needed(self, profile: str, spec: TrialSpec, done: list[dict]) -> bool:
        """Pacing(repeats=Repeats.UNTIL_PRECISE): whether a planned trial must still run, given the ok records of
        the trials finished so far: False once the figures it would repeat are precise enough
        (lab/measures/precision.py)."""
        raise NotImplementedError(f"{self.name} repeats its profile's count")

    def pg_sessions(self, backend_cls: type[Backend], profile: str) -> int:
        """PostgreSQL sessions one trial of this backend holds at most: its lock's, its runs' writes, the
        observer's. The runner fits trials at once to what the server allows (lab/runner/waves.py); a run
        records the peak it saw beside this, so an estimate too low shows in meta.json."""
        return 4 if backend_cls.lock_service == "postgres" else 2

    def parallelism(self, profile: str) -> int:
        """How many trials may run at once: they wait on timers, so many, within the connection budget."""
        return self.profile_params(profile).get("parallel", 1)
