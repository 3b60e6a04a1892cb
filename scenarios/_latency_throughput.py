"""The latency trial's throughput step: k workers acquiring and releasing in slices of a window, until the grants
per second of the slices agree or the step's budget is spent (scenarios/latency.py runs it per configuration).
"""

from __future__ import annotations

import threading
import time

from lab.measures.precision import repeat
from scenarios._latency_samples import must, rule, stats
from scenarios.base import TrialEnv

# The window in five slices, grants per second in each; +-10% after three (lab/measures/precision.py; the profile's
# window is the cap).
SLICES, SLICE_RULE = 5, (0.10, 3)
# A throughput slice ends when every worker's acquire has returned, so a lock whose contended acquire blocks holds a
# slice open for as long as it blocks: measured on the reference, 8 workers on procrastinate's one key took 91 s for
# a 1 s window (slices of 24 and 26 s), redbeat's 24 s. Slices stop once this many windows are spent, and the
# configuration's grants per second stay grants over the seconds they took.
THROUGHPUT_BUDGET_WINDOWS = 3


def measure_throughput(env: TrialEnv, workers: int, keys: int) -> dict:
    """k workers, each its own instance, acquiring and releasing in slices of the window until the grants per
    second of the slices agree (the precision rule, at most the whole window, and no slice started once
    THROUGHPUT_BUDGET_WINDOWS windows are spent): grants per second."""
    instances = [env.backend(key=env.key(f"throughput-{workers}-{keys}-{w % keys}")) for w in range(workers)]
    cycles: list[list[float]] = [[] for _ in instances]
    refused = [0] * workers
    start, end = threading.Barrier(workers + 1), threading.Barrier(workers + 1)
    length = env.params["window_s"] / SLICES
    going = [True]
    raised: list[BaseException] = []

    def work(i: int) -> None:
        backend = instances[i]
        try:
            while True:
                start.wait()
                if not going[0]:
                    return
                until = time.perf_counter() + length
                while time.perf_counter() < until and not env.stop.is_set():
                    t0 = time.perf_counter()
                    if backend.acquire():
                        backend.release()
                        cycles[i].append(time.perf_counter() - t0)
                    else:
                        refused[i] += 1
                end.wait()
        except threading.BrokenBarrierError:
            return  # another worker raised, or the window closed: its error is the trial's
        except BaseException as error:  # noqa: BLE001 - a worker's error ends the trial, it must not hang it
            raised.append(error)
            start.abort()
            end.abort()

    elapsed = [0.0]

    def one_slice(_: int) -> tuple[float, ...]:
        before = sum(len(c) for c in cycles)
        start.wait()
        began = time.perf_counter()
        end.wait()
        seconds = time.perf_counter() - began
        elapsed[0] += seconds
        return ((sum(len(c) for c in cycles) - before) / seconds,)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(workers)]
    budget = THROUGHPUT_BUDGET_WINDOWS * env.params["window_s"]
    try:
        for backend in instances:  # connect outside the window
            must(backend.acquire())
            backend.release()
        for thread in threads:
            thread.start()
        try:
            slices, precision = repeat(rule(SLICES, SLICE_RULE), one_slice,
                                       out_of_time=lambda: elapsed[0] >= budget)
            going[0] = False
            start.wait()
        except threading.BrokenBarrierError:
            if raised:
                raise raised[0] from None  # a worker's acquire or release raised: the trial errors with it
            raise
        for thread in threads:
            thread.join()
    finally:
        start.abort()
        end.abort()
        for backend in instances:
            backend.close()
    done = [c for per_worker in cycles for c in per_worker]
    return {"workers": workers, "keys": keys, "grants_per_s": round(len(done) / elapsed[0], 1), "budget_s": budget,
            "cycle": stats(done), "refused": sum(refused), "seconds": round(elapsed[0], 3),
            "slices_per_s": [round(x[0], 1) for x in slices], "precision": precision}
