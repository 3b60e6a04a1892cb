"""The lane scheduler: which scenarios run side by side, and how a stop, an error or Ctrl-C in one lane ends them all.

A phase is a few pools, each a queue of scenarios and the number of lanes that take from it side by side: a lane
that finishes a scenario takes the pool's next one, so a scenario that runs longer than its estimate delays only
its own lane, and the others take up the rest of the queue. The queue is longest estimate first (plan order without
estimates): the long ones start early, the short ones fill the ends.

A module of its own because the wind-down is the delicate part: the other lanes' trials must see the stop
and clean up before the servers are stopped under them, and the main thread must stay responsive to Ctrl-C.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from lab import pacing as declared  # its Lane: where a scenario declares its trials run
from scenarios.base import Scenario

LANE_WIND_DOWN_S = 30.0  # after a stop, how long the other lanes' trials get to see it and clean up
# Scenarios on servers of each trial's (or event's) own share no server with one another, so they run in this many
# lanes side by side; a machine of 2 cores spends most of their time waiting on timers and promotions.
OWN_SERVER_LANES = 2
# The run's-server scenarios run in this many lanes side by side where none of their trials acts on a server the
# others share (an exclusive trial: a restart of a server the lab was given) and their sessions fit the server's
# budget together (lab/runner/run.py shared_lanes); one lane otherwise. Most of them wait on TTLs, restarts and
# bisection steps: measured on the reference, the machine sat 80-90 % idle through the second half of the phase.
SHARED_LANES = 2
JOIN_POLL_S = 0.2  # a short join keeps the main thread responsive to Ctrl-C


@dataclass(frozen=True)
class Pool:
    """Scenarios that up to `lanes` lanes run side by side, each lane taking the next in order once it is free."""

    scenarios: tuple[Scenario, ...]
    lanes: int = 1

    def __post_init__(self):
        if self.lanes < 1:
            raise ValueError(f"a pool needs at least one lane, not {self.lanes}")

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.scenarios]


Phase = list[Pool]


def schedule(chosen: list[Scenario], estimates: dict[str, float] | None = None,
             shared_lanes: int = 1) -> list[Phase]:
    """Phases of pools, by each scenario's declared lane: first the run's-server scenarios (in `shared_lanes`
    lanes) beside those on servers of their own (in OWN_SERVER_LANES lanes), then each Lane.ALONE scenario by itself.
    Within a pool the longest estimate comes first, plan order among equals (and without estimates)."""
    shared = [s for s in chosen if s.pacing.lane not in (declared.Lane.OWN_SERVERS, declared.Lane.ALONE)]
    own = [s for s in chosen if s.pacing.lane is declared.Lane.OWN_SERVERS]
    first = [Pool(_longest_first(members, estimates or {}), lanes)
             for members, lanes in ((shared, shared_lanes), (own, OWN_SERVER_LANES)) if members]
    phases = [first] if first else []
    phases += [[Pool((s,))] for s in chosen if s.pacing.lane is declared.Lane.ALONE]
    return phases


def _longest_first(scenarios: list[Scenario], estimates: dict[str, float]) -> tuple[Scenario, ...]:
    return tuple(sorted(scenarios, key=lambda s: -estimates.get(s.name, 0.0)))  # stable: plan order among equals


def dealt(pool: Pool, seconds: dict[str, float]) -> list[list[str]]:
    """The pool's lanes as they would run if each scenario took `seconds` (missing: 0): the next scenario to the lane
    that is free first (the lowest-numbered among equals)."""
    lanes: list[list[str]] = [[] for _ in range(min(pool.lanes, max(1, len(pool.scenarios))))]
    loads = [0.0] * len(lanes)
    for scenario in pool.scenarios:
        free = min(range(len(lanes)), key=lambda i: (loads[i], i))
        lanes[free].append(scenario.name)
        loads[free] += seconds.get(scenario.name, 0.0)
    return lanes


def composed(phases: list[Phase], seconds: dict[str, float]) -> float:
    """A run's seconds from its scenarios' (bounds or walls) as schedule() lays them out: within a phase the
    pools run side by side and each pool's lanes take its queue in order (dealt()), so the longest lane counts; the
    phases follow each other. A scenario missing from `seconds` (not run) counts 0."""
    return sum(max((sum(seconds.get(name, 0.0) for name in lane) for pool in phase for lane in dealt(pool, seconds)),
                   default=0.0)
               for phase in phases)


@dataclass
class _Queue:
    """A pool's scenarios not yet taken, shared by its lanes."""

    waiting: deque = field(default_factory=deque)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self) -> Scenario | None:
        with self.lock:
            return self.waiting.popleft() if self.waiting else None


def run_lanes(phase: Phase, run: Callable[[Scenario], None], stop: threading.Event) -> None:
    """Run each pool's scenarios in its lanes side by side, each lane on a thread of its own taking the pool's next
    scenario once it is free; the main thread waits, responsive to Ctrl-C. An error or Ctrl-C in any lane stops them
    all, and the lanes wind down (their trials see the stop) before the servers are stopped under them."""
    failures: list[BaseException] = []
    threads = []
    for pool in phase:
        queue = _Queue(deque(pool.scenarios))
        threads += [threading.Thread(target=_lane_thread, args=(queue, run, stop, failures),
                                     name=f"lane-{pool.scenarios[0].name}-{i}", daemon=True)
                    for i in range(min(pool.lanes, len(pool.scenarios)))]
    for thread in threads:
        thread.start()
    interrupted = _wind_down(threads, stop)
    if interrupted is not None:
        raise interrupted
    if failures:
        raise failures[0]


def _lane_thread(queue: _Queue, run: Callable[[Scenario], None], stop: threading.Event,
                 failures: list[BaseException]) -> None:
    try:
        while not stop.is_set():
            scenario = queue.take()
            if scenario is None:
                return
            run(scenario)
    except BaseException as exc:  # raised again on the main thread
        failures.append(exc)
        stop.set()


def _wind_down(threads: list[threading.Thread], stop: threading.Event) -> BaseException | None:
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
    return interrupted
