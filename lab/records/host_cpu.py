"""The CPU the host took from this machine while the lab ran (steal time, from /proc/stat), per interval.

Why: on a shared virtual machine the hypervisor runs other guests on our CPUs. In the committed reference run
20261203-100722-3066 the host took 0% of this 2-core machine's CPU during cases and 31% during latency, 19% over
the run. A wall time beside its bound means little without the share of the machine the run had, so each
scenario and the run record it. /proc/stat's first line counts all CPUs' time since boot in user, nice,
system, idle, iowait, irq, softirq and steal (guest time is already inside user); the steal share of an
interval is steal's change over the change of their sum. Linux only: elsewhere None.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")
_COUNTED = 8  # user nice system idle iowait irq softirq steal
_STEAL = 7


@dataclass(frozen=True)
class CpuTimes:
    """All CPUs' time since boot, in clock ticks: the steal and the total it is a share of."""

    steal: int
    total: int


def parse(line: str) -> CpuTimes | None:
    """The aggregate 'cpu ' line of /proc/stat, or None when it is not one (a kernel without steal counts)."""
    fields = line.split()
    if not fields or fields[0] != "cpu" or len(fields) < 1 + _COUNTED:
        return None
    ticks = [int(value) for value in fields[1:1 + _COUNTED]]
    return CpuTimes(steal=ticks[_STEAL], total=sum(ticks))


def read(path: Path = PROC_STAT) -> CpuTimes | None:
    """Now's counts, or None where the kernel gives none."""
    try:
        with path.open() as stat:
            return parse(stat.readline())
    except (OSError, ValueError):
        return None


def stolen_share(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """The share of all CPUs' time the host took between two readings (0.22 is 22%); None without both, or
    when no tick passed between them."""
    if before is None or after is None or after.total <= before.total:
        return None
    return max(0.0, (after.steal - before.steal) / (after.total - before.total))


class Window:
    """An interval opened now: stolen() is the host's share of the CPU since then."""

    def __init__(self) -> None:
        self.start = read()

    def stolen(self) -> float | None:
        return stolen_share(self.start, read())


def describe(share: float | None) -> str:
    """'; 22% of the CPU taken by the host', or nothing when unknown."""
    return "" if share is None else f"; {share:.0%} of the CPU taken by the host"
