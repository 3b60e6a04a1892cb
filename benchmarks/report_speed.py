"""How long does `lab report` take, and how much memory? Renders runs as the command does, each render a fresh
process, with the chart cache empty (cold: every chart drawn, as the first render of a new run) and filled (warm: a
re-render), with and without --html, and prints seconds and peak memory, whole and per 1,000 trials, as min / median /
max over the renders.

    python benchmarks/report_speed.py [RUN ...] [--previous RUN] [--warm 5] [--cold 1]

Without RUN it renders the committed reference as REPORT.md's Provenance names it (its run and previous reference).
Every render's files are checked byte for byte against the first cold render's, the slow path (every chart drawn),
and, for the reference, its REPORT*.md, charts and timelines against the committed ones (which a change of the
report's words since they were rendered makes differ: that line then names them). Peak memory is the largest resident set of the report's own process, and
apart that of the worker processes a cold render draws its charts in (lab/report/chart_cache.py). CPU is user +
system seconds of the report and its workers. Figures, not assertions: the machine is shared, so read the median and
the spread (the target for the reference, issue 60: a warm render at most 10 s and 400 MB on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs `lab report` (lab.cli.main, as the console script does) and prints its own peak RSS and its workers'.
CHILD = """
import json, resource, sys
from lab.cli import main
status = main(sys.argv[1:])
own, workers = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({"status": status, "own_kib": own.ru_maxrss, "workers_kib": workers.ru_maxrss,
                  "cpu_s": own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime}))
"""


def committed_reference() -> tuple[list[str], str | None]:
    """The runs the committed REPORT.md renders and the previous reference it names (its Provenance table)."""
    from lab.report.meta import provenance_runs

    text = (ROOT / "REPORT.md").read_text()
    runs = provenance_runs(text)
    if not runs:
        sys.exit("REPORT.md names no run in its Provenance: give the runs to render")
    previous = re.search(r"^\| previous reference \| (.+?) \|$", text, re.M)
    return runs, previous.group(1) if previous else None


def trials_of(runs: list[str], results: Path) -> int:
    """How many trials the report counts: the latest record of each trial id over the runs."""
    ids = set()
    for run in runs:
        for line in (results / run / "trials.jsonl").read_text().splitlines():
            try:
                ids.add(json.loads(line)["id"])
            except (json.JSONDecodeError, KeyError):
                continue
    return len(ids)


def render(runs: list[str], previous: str | None, html: bool, cache: Path, out: Path) -> dict:
    """One `lab report` in a fresh process: wall seconds, CPU seconds, peak RSS of its own and of its workers (KiB)."""
    argv = ["report", *runs, "--results", str(ROOT / "results"), "--output", str(out / "REPORT.md")]
    argv += ["--previous", previous] if previous else []
    argv += ["--html"] if html else []
    env = {**os.environ, "LOCKLAB_CHART_CACHE": str(cache)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"lab report {' '.join(argv[1:])} failed:\n{done.stderr[-4000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return {"wall_s": wall, **figures}


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file a render wrote, by its path in the output folder."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def spread(values: list[float], digits: int = 1) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return (f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f}, "
            f"n={len(values)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", help="run ids under results/ (default: the committed reference)")
    parser.add_argument("--previous", help="the previous reference to compare with (default: REPORT.md's)")
    parser.add_argument("--warm", type=int, default=5, help="renders with the chart cache filled, per mode")
    parser.add_argument("--cold", type=int, default=1, help="renders with the chart cache empty, per mode")
    args = parser.parse_args()
    reference = not args.runs
    runs, previous = committed_reference() if reference else (args.runs, args.previous)
    previous = args.previous or previous
    trials = trials_of(runs, ROOT / "results")
    per = trials / 1000
    committed = {}
    if reference:  # the committed report's files, byte for byte what every render must write
        committed = {str(p.relative_to(ROOT)): p.read_bytes()
                     for p in [*ROOT.glob("REPORT*.md"), *ROOT.glob("*.png"), *ROOT.glob("timelines/*.png")]}
    print(f"lab report {' '.join(runs)}{f' --previous {previous}' if previous else ''}: {trials:,} trials; "
          f"{os.cpu_count()} processors, this process may use {len(os.sched_getaffinity(0))}; "
          f"median (min-max, n) of fresh processes")
    differ: list[str] = []  # a render's file that is not the first cold render's
    stale: set[str] = set()  # a committed file no render wrote again
    with tempfile.TemporaryDirectory(prefix="report-speed-") as temp:
        for html in (False, True):
            mode = "lab report --html" if html else "lab report"
            first: dict[str, bytes] = {}
            warm_cache = Path(temp) / f"cache-{html}"
            if not args.cold:  # the warm renders need a filled cache: one cold render, not counted, fills it
                render(runs, previous, html, warm_cache, Path(temp) / f"fill-{html}")
                first = files_of(Path(temp) / f"fill-{html}")
            for cold in (True, False):
                figures = []
                for i in range(args.cold if cold else args.warm):
                    cache = Path(temp) / f"cold-{html}-{i}" if cold else warm_cache
                    out = Path(temp) / f"out-{html}-{cold}-{i}"
                    figures.append(render(runs, previous, html, cache, out))
                    if cold and cache.exists() and not warm_cache.exists():
                        cache.rename(warm_cache)  # the warm renders read what this cold one drew
                    files = files_of(out)
                    first = first or files
                    which = f"{mode}, {'cold' if cold else 'warm'} {i + 1}"
                    differ += [f"{which}: {name}" for name in sorted(set(first) | set(files))
                               if first.get(name) != files.get(name)]
                    stale |= {name for name, data in committed.items() if files.get(name) != data}
                if not figures:
                    continue
                wall = [f["wall_s"] for f in figures]
                own = [f["own_kib"] / 1024 for f in figures]
                workers = [f["workers_kib"] / 1024 for f in figures]
                print(f"{mode}, {'cold' if cold else 'warm'}: {spread(wall)} s, {spread([w / per for w in wall], 2)} s "
                      f"per 1,000 trials; peak {spread(own, 0)} MB, {spread([m / per for m in own])} MB per 1,000 "
                      f"trials" + (f"; chart workers' peak {spread(workers, 0)} MB" if max(workers) else "")
                      + f"; CPU {spread([f['cpu_s'] for f in figures])} s")
    print("output: " + ("every render byte for byte the first cold one's (every chart drawn)" if not differ else
                        "DIFFERS from the first cold render: " + "; ".join(differ[:20])))
    if reference:
        print(f"committed files ({len(committed)}): " + ("every one written again byte for byte" if not stale else
                                                         f"{len(stale)} differ: {', '.join(sorted(stale)[:10])}"))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
