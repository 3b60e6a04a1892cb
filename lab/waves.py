"""Fit each scenario's concurrency to the PostgreSQL sessions the server allows, before any work starts.

A scenario says how many trials it would run at once and how many PostgreSQL sessions
one trial of a backend holds at most (a Redis lock's timing trial holds none). The
runner gives each scenario a budget of the sessions the server allows the lab: a trial
waits for its share before it starts, so a small server runs the scenario in waves
instead of refusing sessions mid-trial. When not even one trial fits, the run is
refused in one line naming both numbers.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from lab.errors import Interrupted, LabError
from lab.servers.capacity import Capacity

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
    room = capacity.available - LAB_OVERHEAD
    waves = []
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
        self._free = total
        self._cond = threading.Condition()

    def take(self, cost: int, stop: threading.Event) -> None:
        """Wait until cost sessions are free and take them; Interrupted when the run is stopped first."""
        cost = min(cost, self.total)
        with self._cond:
            while self._free < cost:
                if stop.is_set():
                    raise Interrupted()
                self._cond.wait(0.2)
            self._free -= cost

    def give(self, cost: int) -> None:
        with self._cond:
            self._free += min(cost, self.total)
            self._cond.notify_all()
