"""Which lab process owns a temp dir, and whether it still runs: what the next run's sweep goes by.

A folder is marked with "<pid> <start>" where start is the process's start in clock ticks since boot
(/proc/<pid>/stat, field 22). That number never changes for a process, and a pid reused by another
process has another. A start time in seconds since the epoch (what psutil's create_time() gives, and what
these files held before) is boot time plus that count, and the kernel's boot time moves whenever the wall
clock is stepped or slewed across a second: a live lab's folder then looked abandoned, and another lab
starting at that moment would remove the data of a server still running (the likely cause of a CI run in which
every test after some point found the session's PostgreSQL gone). Seen on this machine kind: /proc/stat's btime
read 1796237432 at 12:22 and 1796237460 at 13:45 on 2026-12-03, the wall clock stepped 28 s against the boot clock.
"""

from __future__ import annotations

import os
from pathlib import Path

OWNER_FILE = "owner.pid"


def start_ticks(pid: int) -> int | None:
    """The process's start in clock ticks since boot, or None if no such process runs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')': count from the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[19])  # field 22 of the line; fields[0] here is field 3


def mark_owner(folder: Path) -> None:
    """Record this process as the folder's owner."""
    pid = os.getpid()
    (folder / OWNER_FILE).write_text(f"{pid} {start_ticks(pid)}\n")


def owner_alive(folder: Path) -> bool:
    """Whether the process that marked this folder still runs. A mark that cannot be read counts as alive (one
    being written by a lab starting this moment is empty): the sweep removes only what it knows is abandoned."""
    try:
        pid_text, start_text = (folder / OWNER_FILE).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return True
    started = start_ticks(pid)
    if started is None:
        return False
    if not start_text.isdigit():  # an older lab's mark, in seconds since the epoch: the pid alone decides
        return True
    return started == int(start_text)
