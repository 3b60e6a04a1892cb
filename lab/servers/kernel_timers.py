"""How late Linux may fire a TCP keepalive timer: the timer wheel's granularity at the kernel's HZ.

A keepalive timer of d seconds sits in a wheel level whose buckets are 8**level jiffies wide, and the
kernel rounds its expiry *up* to the bucket (kernel/time/timer.c), so it fires up to one granularity late:
about 131 s for the 7200 s default at HZ=250, never more than 8/63 of d at any HZ. netdrop compares the
measured end of a dropped session with lab doctor's idle + count x interval, so it states this lateness.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

TIMER_LIST = Path("/proc/timer_list")
LEVEL_BITS, LEVEL_SHIFT = 6, 3  # 64 buckets a level, each level 8 times coarser
WORST_FRACTION = 8 / 63  # a level starts at 63 x 8**(n-1) jiffies and is 8**n wide: the most late any HZ gets


def measure_hz(span_s: float = 0.5) -> int | None:
    """The kernel's HZ, from jiffies counted in /proc/timer_list over span_s; None where unreadable (not root)."""
    def jiffies() -> tuple[int, float] | None:
        try:
            with TIMER_LIST.open() as f:
                for line in f:
                    match = re.match(r"jiffies: (\d+)", line)
                    if match:
                        return int(match.group(1)), time.monotonic()
        except OSError:
            return None
        return None

    first = jiffies()
    if first is None:
        return None
    time.sleep(span_s)  # wall time for the counter to advance; not standing in for any server
    second = jiffies()
    if second is None:
        return None
    rate = (second[0] - first[0]) / (second[1] - first[1])
    return min((100, 250, 300, 1000), key=lambda hz: abs(hz - rate))  # the kernel's configurable values


def granularity_s(delay_s: float, hz: int | None) -> float:
    """The most a timer of delay_s fires late: its wheel level's bucket width (8/63 of delay_s if HZ unknown)."""
    if hz is None:
        return delay_s * WORST_FRACTION
    ticks = int(delay_s * hz)
    level = 0
    while ticks >= ((1 << LEVEL_BITS) - 1) << (level * LEVEL_SHIFT):
        level += 1
    return (1 << (level * LEVEL_SHIFT)) / hz


def keepalive_lateness_s(idle: float, interval: float, count: int, hz: int | None) -> float:
    """The most the kernel's timers add to idle + count x interval: the idle timer's bucket and each probe's."""
    return granularity_s(idle, hz) + count * granularity_s(interval, hz)
