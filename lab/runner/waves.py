"""Fit each scenario's concurrency to the PostgreSQL sessions the server allows, before any work starts.

A scenario says how many trials it would run at once and how many PostgreSQL sessions
one trial of a backend holds at most (a Redis lock's timing trial holds none). The
runner gives each scenario a budget of the sessions the server allows the lab: a trial
starts only when its share is free (without holding a worker while it waits), so a small
server runs the scenario in waves instead of refusing sessions mid-trial. When not even one trial fits, the run is
refused in one line naming both numbers.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

from lab.errors import LabError
from lab.servers.postgres.capacity import Capacity

# Sessions the lab keeps outside any trial: the base of its monitor and writes pools (8 each),
# the session sampler, and a margin for a pool's pre-ping reconnects.
LAB_OVERHEAD = 20


@dataclass(frozen=True)
class Demand:
    """What a scenario asks of the server: its runnable trials' session costs, in the order they run."""

    scenario: str
    costs: tuple[int, ...]  # PostgreSQL sessions each runnable trial holds at most
    wanted: int  # trials the scenario would run at once

    @property
    def unconstrained(self) -> int:
        """Sessions the scenario would hold at its busiest with no limit (its first `wanted` trials)."""
        return sum(sorted(self.costs, reverse=True)[:self.wanted])


@dataclass(frozen=True)
class Wave:
    """How one scenario runs under the server's limits."""

    scenario: str
    trials: int
    wanted: int
    budget: int  # PostgreSQL sessions its trials may hold at once
    would_use: int  # sessions it would hold at its busiest without the budget
    waves: int  # how many times over the budget its trials' sessions add up to (at least its own waves)

    @property
    def limited(self) -> bool:
        return self.would_use > self.budget

    def as_dict(self) -> dict:
        return {"trials": self.trials, "wanted_at_once": self.wanted, "session_budget": self.budget,
                "would_use_sessions": self.would_use, "waves": self.waves}


def fit(demands: list[Demand], capacity: Capacity, where: str) -> list[Wave]:
    """One Wave per scenario with runnable trials; LabError when one trial cannot fit at all."""
    waves, room = [], capacity.available - LAB_OVERHEAD
    for demand in demands:
        if not demand.costs:
            continue
        biggest = max(demand.costs)
        if room < biggest:
            raise LabError(f"PostgreSQL at {where} has too few free connections: scenario {demand.scenario} needs "
                           f"{biggest + LAB_OVERHEAD} ({biggest} for one trial, {LAB_OVERHEAD} for the lab's pools), "
                           f"the server allows {max(0, capacity.available)} ({capacity.describe()})")
        own = math.ceil(len(demand.costs) / demand.wanted)
        over_budget = math.ceil(sum(demand.costs) / room) if demand.unconstrained > room else 1
        waves.append(Wave(demand.scenario, len(demand.costs), demand.wanted, room, demand.unconstrained,
                          max(own, over_budget)))
    return waves


def describe(wave: Wave, capacity: Capacity) -> str:
    """One line for the console, printed before the run."""
    return (f"{wave.scenario}: its trials would hold up to {wave.would_use} PostgreSQL sessions at once; the server "
            f"allows the lab {capacity.available} ({capacity.describe()}), so they share {wave.budget} and run in "
            f"about {wave.waves} waves")


class SessionBudget:
    """A weighted semaphore over PostgreSQL sessions: a trial takes its cost before it starts and gives it back."""

    def __init__(self, total: int):
        self.total = total
        self.free = total
        self._lock = threading.Lock()

    def try_take(self, cost: int) -> bool:
        """Take cost sessions if they are free now (a trial costing more than the whole budget waits for
        all of it)."""
        cost = min(cost, self.total)
        with self._lock:
            if self.free < cost:
                return False
            self.free -= cost
            return True

    def give(self, cost: int) -> None:
        with self._lock:
            self.free += min(cost, self.total)


T = TypeVar("T")  # what a trial is to the dispatcher: a TrialSpec in the runner


class Dispatch(Generic[T]):
    """The trials of a scenario still to start, in plan order, each with its session cost."""

    def __init__(self, trials: list[tuple[T, int]], budget: SessionBudget, scarce_first: bool = False):
        """scarce_first: when the server's sessions are what limits the scenario, the trials that need them
        go first (stable, so in plan order among equals) and those that need none fill the other workers;
        in plan order they could take every free worker while sessions stood idle."""
        self._waiting = sorted(trials, key=lambda trial: -trial[1]) if scarce_first else list(trials)
        self._budget = budget

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def again(self, trial: T, cost: int) -> None:
        """Put a trial back at the head of the queue, to start before the ones still waiting."""
        self._waiting.insert(0, (trial, cost))

    def drop(self, unneeded: Callable[[T], bool]) -> list[T]:
        """Drop the waiting trials the scenario no longer needs; returns them."""
        dropped: list[T] = []
        kept: list[tuple[T, int]] = []
        for trial in self._waiting:
            if unneeded(trial[0]):
                dropped.append(trial[0])
            else:
                kept.append(trial)
        self._waiting = kept
        return dropped

    def ready(self, slots: int, alone: Callable[[T], bool] = lambda trial: False,
              busy: bool = False, later: Callable[[T], bool] = lambda trial: False) -> list[tuple[T, int]]:
        """Up to `slots` trials whose sessions are free now, taken from the budget, earliest first. A trial that
        must run alone (`alone`) starts only when none runs (`busy` False) and none starts with it; the caller
        gives no slots while it runs. Others that fit go ahead of a waiting one, so a scenario's shared trials
        are not held up behind it. A trial that must wait for others (`later`) stays, and the ones behind it may go."""
        started: list[tuple[T, int]] = []
        still: list[tuple[T, int]] = []
        for trial in self._waiting:
            fits = len(started) < slots and not later(trial[0])
            by_itself = fits and alone(trial[0])
            if by_itself:
                fits = not busy and not started
            if fits and self._budget.try_take(trial[1]):
                started.append(trial)
                if by_itself:
                    slots = 0  # nothing beside it
            else:
                still.append(trial)
        self._waiting = still
        return started
