"""The lane scheduler: which scenarios run side by side, and how a stop, an error or Ctrl-C in one lane ends them all.

A phase is a few pools, each a queue of scenarios and the number of lanes that take from it side by side: a lane
that finishes a scenario takes the pool's next one, so a scenario that runs longer than its estimate delays only
its own lane, and the others take up the rest of the queue. The queue is longest estimate first (plan order without
estimates): the long ones start early, the short ones fill the ends. A lane whose pool has nothing left takes from
another pool of the phase while that pool runs fewer than its ceiling: measured on the reference, the own-server
scenarios were done 300 s before the run's-server ones, whose one remaining lane left the machine half idle.

A module of its own because the wind-down is the delicate part: the other lanes' trials must see the stop
and clean up before the servers are stopped under them, and the main thread must stay responsive to Ctrl-C.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from lab.declarations import pacing as declared  # its Lane: where a scenario declares its trials run
from scenarios.base import Scenario

LANE_WIND_DOWN_S = 30.0  # after a stop, how long the other lanes' trials get to see it and clean up
# Scenarios on servers of each trial's (or event's) own share no server with one another, so they run in this many
# lanes side by side; a machine of 2 cores spends most of their time waiting on timers and promotions.
OWN_SERVER_LANES = 2
# The run's-server scenarios run in this many lanes side by side where none of their trials acts on a server the
# others share (an exclusive trial: a restart of a server the lab was given) and their sessions fit the server's
# budget together (lab/runner/run.py shared_lanes); one lane otherwise. Most of them wait on TTLs, restarts and
# bisection steps; with the own-server lanes done, they take those lanes too (shared_ceiling).
SHARED_LANES = 2
JOIN_POLL_S = 0.2  # a short join keeps the main thread responsive to Ctrl-C


@dataclass(frozen=True)
class Pool:
    """Scenarios that `lanes` lanes run side by side, each lane taking the next in order once it is free. A lane of
    another pool of the phase whose queue is empty may take this pool's next too, while fewer than `ceiling` of its
    scenarios run (default: its own lanes, so none)."""

    scenarios: tuple[Scenario, ...]
    lanes: int = 1
    ceiling: int = 0  # 0: as many as its lanes

    def __post_init__(self):
        if self.lanes < 1:
            raise ValueError(f"a pool needs at least one lane, not {self.lanes}")

    @property
    def at_most(self) -> int:
        """How many of its scenarios may run at once, in its own lanes and others'."""
        return max(self.lanes, self.ceiling)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.scenarios]


Phase = list[Pool]


def schedule(chosen: list[Scenario], estimates: dict[str, float] | None = None,
             shared_lanes: int = 1, shared_ceiling: int = 0) -> list[Phase]:
    """Phases of pools, by each scenario's declared lane: first the run's-server scenarios (in `shared_lanes`
    lanes, and up to `shared_ceiling` at once in lanes the others leave free) beside those on servers of their own
    (in OWN_SERVER_LANES lanes, and in any lane the others leave free: they share no server), then each Lane.ALONE
    scenario by itself. Within a pool the longest estimate comes first, plan order among equals (and without
    estimates)."""
    shared = [s for s in chosen if s.pacing.lane not in (declared.Lane.OWN_SERVERS, declared.Lane.ALONE)]
    own = [s for s in chosen if s.pacing.lane is declared.Lane.OWN_SERVERS]
    first = [Pool(_longest_first(members, estimates or {}), lanes, ceiling)
             for members, lanes, ceiling in ((shared, shared_lanes, shared_ceiling),
                                            (own, OWN_SERVER_LANES, OWN_SERVER_LANES + shared_lanes)) if members]
    phases = [first] if first else []
    phases += [[Pool((s,))] for s in chosen if s.pacing.lane is declared.Lane.ALONE]
    return phases


def _longest_first(scenarios: list[Scenario], estimates: dict[str, float]) -> tuple[Scenario, ...]:
    return tuple(sorted(scenarios, key=lambda s: -estimates.get(s.name, 0.0)))  # stable: plan order among equals


class _Queues:
    """A phase's pools, what of each is still waiting and how many of each run: which scenario a free lane takes."""

    def __init__(self, phase: Phase):
        self.pools = phase
        self.waiting = [deque(pool.scenarios) for pool in phase]
        self.running = [0] * len(phase)

    def lanes(self) -> list[int]:
        """Each lane's own pool (by index), as many lanes as each pool has scenarios to fill, at most its lanes."""
        return [i for i, pool in enumerate(self.pools) for _ in range(min(pool.lanes, len(pool.scenarios)))]

    def take(self, home: int) -> tuple[int, Scenario] | None:
        """The next scenario for a lane of pool `home`: its own pool's, else the first other pool's that may run
        one more; None when none may start now."""
        for i in [home] + [i for i in range(len(self.pools)) if i != home]:
            if self.waiting[i] and self.running[i] < self.pools[i].at_most:
                self.running[i] += 1
                return i, self.waiting[i].popleft()
        return None

    def done(self, pool: int) -> None:
        self.running[pool] -= 1

    def empty(self) -> bool:
        return not any(self.waiting)


def laid_out(phase: Phase, seconds: dict[str, float]) -> list[list[str]]:
    """The phase's lanes as run_lanes would run them if each scenario took `seconds` (missing: 0): the lane free
    first (the lowest-numbered among equals) takes its pool's next, else another pool's while that one is under its
    ceiling, else waits for a scenario to end."""
    queues = _Queues(phase)
    homes = queues.lanes()
    free_at = [0.0] * len(homes)
    lanes: list[list[str]] = [[] for _ in homes]
    ends: list[tuple[float, int]] = []  # (when, pool) of the scenarios taken and not yet counted as ended
    while not queues.empty():
        lane = min(range(len(homes)), key=lambda i: (free_at[i], i))
        now = free_at[lane]
        for when, pool in [e for e in ends if e[0] <= now]:
            queues.done(pool)
            ends.remove((when, pool))
        taken = queues.take(homes[lane])
        if taken is None:  # every pool with scenarios left is at its ceiling: wait for the next end
            free_at[lane] = min(when for when, _ in ends)
            continue
        pool, scenario = taken
        lanes[lane].append(scenario.name)
        free_at[lane] = now + seconds.get(scenario.name, 0.0)
        ends.append((free_at[lane], pool))
    return lanes


def composed(phases: list[Phase], seconds: dict[str, float]) -> float:
    """A run's seconds from its scenarios' (bounds or walls) as schedule() lays them out and run_lanes runs them
    (laid_out): within a phase the longest lane counts, and the phases follow each other. A scenario missing from
    `seconds` (not run) counts 0."""
    return sum(max((sum(seconds.get(name, 0.0) for name in lane) for lane in laid_out(phase, seconds)), default=0.0)
               for phase in phases)


def run_lanes(phase: Phase, run: Callable[[Scenario], None], stop: threading.Event) -> None:
    """Run the phase's lanes side by side, each on a thread of its own taking its pool's next scenario once it is
    free, or another pool's while that one is under its ceiling; the main thread waits, responsive to Ctrl-C. An
    error or Ctrl-C in any lane stops them all, and the lanes wind down (their trials see the stop) before the
    servers are stopped under them."""
    failures: list[BaseException] = []
    queues, changed = _Queues(phase), threading.Condition()
    threads = [threading.Thread(target=_lane_thread, args=(home, queues, changed, run, stop, failures),
                                name=f"lane-{i}-{phase[home].scenarios[0].name}", daemon=True)
               for i, home in enumerate(queues.lanes())]
    for thread in threads:
        thread.start()
    interrupted = _wind_down(threads, stop, changed)
    if interrupted is not None:
        raise interrupted
    if failures:
        raise failures[0]


def _lane_thread(home: int, queues: _Queues, changed: threading.Condition, run: Callable[[Scenario], None],
                 stop: threading.Event, failures: list[BaseException]) -> None:
    try:
        while True:
            with changed:
                taken = queues.take(home)
                while taken is None and not queues.empty() and not stop.is_set():
                    changed.wait(JOIN_POLL_S)  # every pool with scenarios left is at its ceiling
                    taken = queues.take(home)
            if taken is None or stop.is_set():
                return
            pool, scenario = taken
            try:
                run(scenario)
            finally:
                with changed:
                    queues.done(pool)
                    changed.notify_all()
    except BaseException as exc:  # raised again on the main thread
        failures.append(exc)
        stop.set()


def _wind_down(threads: list[threading.Thread], stop: threading.Event,
               changed: threading.Condition) -> BaseException | None:
    """Wait for the lanes; once stopped, at most LANE_WIND_DOWN_S more. Returns a Ctrl-C that came meanwhile (it
    stops the lanes and the wait goes on), None without one."""
    interrupted: BaseException | None = None
    give_up = None
    for thread in threads:
        while thread.is_alive():
            if give_up is not None and time.monotonic() > give_up:
                break  # a trial that ignores the stop: its children die with the lab
            try:
                thread.join(JOIN_POLL_S)
            except BaseException as exc:  # Ctrl-C while the lanes run: stop them, and still wait
                stop.set()
                interrupted = interrupted or exc
            if stop.is_set() and give_up is None:
                give_up = time.monotonic() + LANE_WIND_DOWN_S
                with changed:
                    changed.notify_all()  # a lane waiting for a pool under its ceiling sees the stop
    return interrupted
