"""The latency trial's handoff step: a holder releases while a waiter of the same process polls, timed from the
release call to the waiter's grant (scenarios/latency.py runs it; WAITS there says how the waiter waits).
"""

from __future__ import annotations

import statistics
import threading
import time

from lab.measures.precision import repeat
from scenarios._latency_samples import must, rule
from scenarios.base import TrialEnv

HANDOFF_TIMEOUT_S = 10.0  # a waiter not granted by then is a failed handoff (a lease would have lapsed long before)
# Blocks of a fifth of the handoffs, each block's median; handoffs are scheduling-bound, so +-15% (the precision
# rule of lab/measures/precision.py; the profile's count is the cap).
HANDOFF_BLOCKS, HANDOFF_RULE = 5, (0.15, 2)


def measure_handoffs(env: TrialEnv):
    """The holder releases while a waiter polls: seconds from the release call to the waiter's grant."""
    key = env.key("handoff")
    holder, waiter = env.backend(key=key), env.backend(key=key)
    seconds: list[float] = []
    tries: list = []
    failed, not_kept_out = 0, 0
    size = max(1, env.params["handoffs"] // HANDOFF_BLOCKS)

    def block(b: int) -> tuple[float, ...]:
        nonlocal failed, not_kept_out
        before = len(seconds)
        for _ in range(size):
            failed_now, let_in = one()
            failed, not_kept_out = failed + failed_now, not_kept_out + let_in
        timed = seconds[before:]
        return (statistics.median(timed) if timed else float("inf"),)

    def one() -> tuple[int, int]:
        """One handoff: (1, 0) when the waiter was never granted, (0, 1) when it got in while held."""
        must(holder.acquire())
        polling, state = threading.Event(), {"tries": 0, "granted": None}

        def wait(state=state, polling=polling):
            deadline = time.monotonic() + HANDOFF_TIMEOUT_S
            while time.monotonic() < deadline and not env.stop.is_set():
                if waiter.acquire():
                    state["granted"] = time.perf_counter()
                    return
                state["tries"] += 1
                polling.set()

        thread = threading.Thread(target=wait, name="latency-waiter", daemon=True)
        thread.start()
        polling.wait(HANDOFF_TIMEOUT_S)  # it has been refused once: it is waiting on the holder
        released_at = time.perf_counter()
        holder.release()
        thread.join(HANDOFF_TIMEOUT_S + 1)
        if state["granted"] is None:
            return 1, 0
        if state["tries"] == 0:  # granted while the holder still held: no handoff to time
            waiter.release()
            return 0, 1
        seconds.append(state["granted"] - released_at)
        tries.append(state["tries"])
        waiter.release()
        return 0, 0

    try:
        _, precision = repeat(rule(HANDOFF_BLOCKS, HANDOFF_RULE), block)
    finally:
        holder.close()
        waiter.close()
    return seconds, tries, failed, not_kept_out, precision
