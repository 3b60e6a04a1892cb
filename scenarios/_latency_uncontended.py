"""The latency trial's uncontended step: one instance acquiring and releasing, each pair beside a sample of its
server's floor and, where the backend declares one, beside its bare library call (scenarios/latency.py runs it).
"""

from __future__ import annotations

import statistics
from typing import Callable

from lab.measures.precision import repeat
from lab.servers.floors import FloorProbe
from lab.servers.floors import timed as _timed
from scenarios._latency_samples import must, rule
from scenarios.base import TrialEnv

# Blocks of a tenth of the iterations, each giving the lock over its floor (and over its bare call) paired within
# the block; within +-10% after three blocks (lab/measures/precision.py; the profile's count is the cap).
BLOCKS, CYCLE_RULE = 10, (0.10, 3)


def measure_uncontended(env: TrialEnv, floors: FloorProbe):
    """One instance acquiring and releasing N times, a floor sample of each kind before each pair, and
    its bare library call's pair beside its own (first on every other iteration, so order favours neither).

    Returns the cold acquire, the (acquire, release) pairs, the floor samples, and the bare call's
    (call, pairs), or None when the backend declares none."""
    backend = env.backend(key=env.key("uncontended"))
    samples: dict[str, list[float]] = {name: [] for name in floors.calls}
    cycles: list[tuple[float, float]] = []
    bare_cycles: list[tuple[float, float]] = []
    bare = None
    try:
        cold = _timed(lambda: must(backend.acquire()))  # connecting included: a job's first acquire
        backend.release()
        bare = backend.bare_call(env.key("bare"))
        # (acquire, release, where its pairs go): the backend's own, then its bare call's
        timed: list[tuple[Callable[[], object], Callable[[], object], list[tuple[float, float]]]] = [
            (backend.acquire, backend.release, cycles)]
        if bare is not None:
            timed.append((bare.acquire, bare.release, bare_cycles))
        for _ in range(3):  # warm the connections and the keep-alive thread out of the figures
            floors.sample()
            for acquire, release, _ in timed:
                must(acquire())
                release()
        size = max(1, env.params["iterations"] // BLOCKS)
        main = floors.main  # the floor call this service's ratio is taken to

        def block(b: int) -> tuple[float, ...]:
            for i in range(b * size, (b + 1) * size):
                for name, seconds in floors.sample().items():
                    samples[name].append(seconds)
                for acquire, release, into in (timed if i % 2 == 0 else timed[::-1]):
                    acquired = _timed(lambda: must(acquire()))
                    into.append((acquired, _timed(release)))
            own = statistics.median(a + r for a, r in cycles[-size:])
            pairs = [own / statistics.median(samples[main][-size:])]
            if bare_cycles:
                pairs.append(own / statistics.median(a + r for a, r in bare_cycles[-size:]))
            return tuple(pairs)

        _, precision = repeat(rule(BLOCKS, CYCLE_RULE), block)
    finally:
        backend.close()
        if bare is not None:
            bare.close()
    return cold, cycles, samples, None if bare is None else (bare.call, bare_cycles), precision
