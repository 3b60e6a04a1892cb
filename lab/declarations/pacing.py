"""How a scenario's trials are paced, declared as one frozen value the runner reads (lab/runner/pacing.py).

A scenario says where its trials run (its lane), what one trial waits at least (its floor), which trials run
with nothing beside them, and how many repetitions it takes (the profile's count, the sequential rule's extra
trials, or until its figures are precise enough). The runner turns that into the run's order, its estimates and
its bounds; a scenario computes none of them. What depends on a scenario's own parameters or measures (a
trial's seconds, its sessions, a floor from the server's keepalives) stays a hook the declaration names.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Lane(Enum):
    """Where a scenario's trials run, which decides what may run beside it (lab/runner/lanes.py)."""

    SHARED = "shared"  # on the run's servers: in two lanes where none reaches the others' servers, else one
    OWN_SERVERS = "own servers"  # only on servers each trial starts itself, so beside the SHARED ones
    ALONE = "alone"  # its figures are times or throughputs another scenario's work would skew: nothing beside it


class Floor(Enum):
    """What one trial cannot take less than, as the scenario declares it (lab/runner/pacing.py trial_floor)."""

    TIMERS = "the profile's timers"  # the timers a trial sits through once (FLOOR_TIMERS), summed
    NONE = "none declared"  # 0: each trial's floor is the waits it was seen to sit through and its measured seconds
    OWN = "the scenario's own"  # Scenario.own_floor(profile) computes it from the scenario's parameters


class Exclusive(Enum):
    """Which of a scenario's trials start with none of its others beside them."""

    NEVER = "never"  # parallelism() alone decides
    PER_TRIAL = "per trial"  # Scenario.exclusive(spec, services) decides, trial by trial


class Repeats(Enum):
    """How many of its planned trials a scenario runs."""

    PROFILE = "the profile's count"  # every trial of the profile's count, and extra ones while a cell is unsettled
    UNTIL_PRECISE = "until precise enough"  # Scenario.still_needed(profile, spec, done) drops the rest


@dataclass(frozen=True)
class Pacing:
    """A scenario's pacing declaration; the runner reads it and nothing else of the scenario's pacing."""

    lane: Lane = Lane.SHARED
    floor: Floor = Floor.TIMERS
    exclusive: Exclusive = Exclusive.NEVER
    repeats: Repeats = Repeats.PROFILE
    # The sequential rule (DESIGN.md, "Strength"): how many more trials a cell may run when its profile's trials
    # disagree (kinds or exercised differ) and none failed. 0: every cell runs its profile's trials, no more.
    # A trial beyond them starts only once the cell's first ones have finished (later()), and is dropped when they
    # agree or one failed (needed()): a failure found stands, and an agreeing cell is settled.
    extra_trials_when_varied: int = 0
