"""Whether a dropped session ended when lab doctor said it would: the rule netdrop and its report share."""

from __future__ import annotations


def ends_as_estimated(ended_s: float, estimate_s: float, interval_s: float, lateness_s: float) -> bool:
    """No earlier than one probe interval before the doctor's idle + count x interval, and no later than one
    interval plus the most the kernel's timer wheel may delay the keepalive timers (lab/servers/kernel_timers.py)."""
    return estimate_s - interval_s <= ended_s <= estimate_s + lateness_s + interval_s
