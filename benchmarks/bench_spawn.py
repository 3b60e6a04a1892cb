"""What does starting a child cost the lab? A full fork (a preexec_fn) against vfork behind setpriv, in one run.

lab/servers/processes.py starts every server and holder from the lab, which holds a few hundred MB and many
threads in a run's first phase. A preexec_fn makes Python fork the whole process, holding the GIL while the page
tables are copied; setting the parent-death signal and the process group through setpriv and Popen's
process_group lets it vfork. This puts the lab's weight in one process (--mb of touched memory, --threads idle
threads) and starts `true` both ways, printing the wall, the parent's CPU and the children's CPU per start and
their ratio.

    python benchmarks/bench_spawn.py [--mb 300] [--threads 150] [--starts 40]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import threading
import time

from lab.servers.processes import SETPRIV, die_with_parent, popen


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def timed(start, starts: int) -> tuple[float, float, float]:
    """Per start: wall, the parent's CPU and the children's CPU, in ms."""
    wall, own, children = time.perf_counter(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    for _ in range(starts):
        start().wait()
    return tuple(1000 * (after - before) / starts for after, before in (
        (time.perf_counter(), wall), (_cpu(resource.RUSAGE_SELF), own), (_cpu(resource.RUSAGE_CHILDREN), children)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=300)
    parser.add_argument("--threads", type=int, default=150)
    parser.add_argument("--starts", type=int, default=40)
    args = parser.parse_args()
    if SETPRIV is None:
        print("setpriv not found (util-linux): the lab forks every child, there is nothing to compare")
        return 2
    weight = [bytearray(b"\1" * (1 << 20)) for _ in range(args.mb)]  # touched, as the lab's heap is
    idle = threading.Event()
    for _ in range(args.threads):
        threading.Thread(target=idle.wait, daemon=True).start()
    forked = timed(lambda: subprocess.Popen(["true"], preexec_fn=die_with_parent), args.starts)
    spawned = timed(lambda: popen(["true"]), args.starts)
    idle.set()
    for name, (wall, own, children) in (("fork (preexec_fn)", forked), ("vfork (setpriv)", spawned)):
        print(f"{name:18} {wall:6.1f} ms wall, {own:5.1f} ms parent CPU, {children:5.1f} ms children's CPU per start")
    print(f"ratio fork / vfork: wall {forked[0] / spawned[0]:.1f}x, "
          f"CPU {(forked[1] + forked[2]) / (spawned[1] + spawned[2]):.1f}x ({len(weight)} MB, {args.threads} threads)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
