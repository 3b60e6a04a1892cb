"""The lane scheduler: which scenarios run side by side, and how a stop, an error or Ctrl-C in one lane ends them all.

A module of its own because the wind-down is the delicate part: the other lanes' trials must see the stop
and clean up before the servers are stopped under them, and the main thread must stay responsive to Ctrl-C.
"""

from __future__ import annotations

import threading
import time
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

Lane = list[Scenario]


def schedule(chosen: list[Scenario], estimates: dict[str, float] | None = None,
             shared_lanes: int = 1) -> list[list[Lane]]:
    """Phases of lanes, by each scenario's declared lane: first the run's-server scenarios beside those on servers
    of their own, then each Lane.ALONE scenario by itself. The own-server scenarios are dealt into OWN_SERVER_LANES
    lanes and the run's-server ones into `shared_lanes`, the longest by its estimate first into the lane with the
    least so far (in plan order without estimates); plan order within a lane."""
    shared = [s for s in chosen if s.pacing.lane not in (declared.Lane.OWN_SERVERS, declared.Lane.ALONE)]
    own = [s for s in chosen if s.pacing.lane is declared.Lane.OWN_SERVERS]
    phases = [[lane for lane in (*_deal(shared, estimates or {}, shared_lanes),
                                 *_deal(own, estimates or {}, OWN_SERVER_LANES)) if lane]]
    phases += [[[s]] for s in chosen if s.pacing.lane is declared.Lane.ALONE]
    return [phase for phase in phases if phase]


def _deal(scenarios: list[Scenario], estimates: dict[str, float], count: int) -> list[Lane]:
    """The scenarios in `count` lanes, each lane's total estimate as even as a greedy deal makes it."""
    lanes: list[Lane] = [[] for _ in range(count)]
    loads = [0.0] * count
    for scenario in sorted(scenarios, key=lambda s: -estimates.get(s.name, 0.0)):  # stable: plan order among equals
        lightest = min(range(count), key=lambda i: (loads[i], len(lanes[i]), i))
        lanes[lightest].append(scenario)
        loads[lightest] += estimates.get(scenario.name, 0.0)
    order = {s.name: i for i, s in enumerate(scenarios)}
    return [sorted(lane, key=lambda s: order[s.name]) for lane in lanes]


def composed(phases: list[list[Lane]], seconds: dict[str, float]) -> float:
    """A run's seconds from its scenarios' (bounds or walls) as schedule() lays them out: within a phase the
    lanes run side by side, so the longest lane counts; a lane's scenarios and the phases follow each other.
    A scenario missing from `seconds` (not run) counts 0."""
    return sum(max((sum(seconds.get(s.name, 0.0) for s in lane) for lane in phase), default=0.0)
               for phase in phases)


def run_lanes(lanes: list[Lane], run: Callable[[Scenario], None], stop: threading.Event) -> None:
    """Run each lane's scenarios one after another, the lanes side by side: the first on this thread,
    the others on threads of their own. An error or Ctrl-C in any lane stops them all, and the other
    lanes wind down (their trials see the stop) before the servers are stopped under them."""
    failures: list[BaseException] = []
    others = [threading.Thread(target=_lane_thread, args=(lane, run, stop, failures), name=f"lane-{lane[0].name}",
                               daemon=True)
              for lane in lanes[1:]]
    for thread in others:
        thread.start()
    interrupted: BaseException | None = None
    try:
        for scenario in lanes[0]:
            if stop.is_set():
                break
            run(scenario)
    except BaseException as exc:
        stop.set()
        interrupted = exc
    late = _wind_down(others, stop)
    interrupted = interrupted or late
    if interrupted is not None:
        raise interrupted
    if failures:
        raise failures[0]


def _lane_thread(lane: Lane, run: Callable[[Scenario], None], stop: threading.Event,
                 failures: list[BaseException]) -> None:
    try:
        for scenario in lane:
            if stop.is_set():
                return
            run(scenario)
    except BaseException as exc:  # raised again on the main thread
        failures.append(exc)
        stop.set()


def _wind_down(others: list[threading.Thread], stop: threading.Event) -> BaseException | None:
    """Wait for the other lanes; once stopped, at most LANE_WIND_DOWN_S more. Returns a Ctrl-C that came
    meanwhile (it stops the lanes and the wait goes on), None without one."""
    interrupted: BaseException | None = None
    give_up = None
    for thread in others:
        while thread.is_alive():
            if give_up is not None and time.monotonic() > give_up:
                break  # a trial that ignores the stop: its children die with the lab
            try:
                thread.join(JOIN_POLL_S)
            except BaseException as exc:  # Ctrl-C while the other lanes run: stop them, and still wait
                stop.set()
                interrupted = interrupted or exc
            if stop.is_set() and give_up is None:
                give_up = time.monotonic() + LANE_WIND_DOWN_S
    return interrupted
