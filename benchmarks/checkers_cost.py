"""What do the checkers add to a run? Re-judge every stored history of a run and time it.

The checkers (lab/checkers/judge.py, with the bounded linearizability search) run once per finished trial,
in the trial's worker thread; this replays exactly that work on a saved run's histories, and checks that
today's checkers give each trial the verdict it recorded. It prints the total, the share of the run's wall
time, and the slowest trials.

    python benchmarks/checkers_cost.py results/<run-id> [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import backends
import scenarios
from lab.checkers.outcomes import judgement_of, latest_per_trial
from lab.records.results import RunFolder
from lab.runner import outcome_fields


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    folder = RunFolder(args.run)
    judged = [r for r in latest_per_trial(folder.trials()) if judgement_of(r) is not None]
    if not judged:
        print(f"{args.run}: no schema-2 trials to re-judge", file=sys.stderr)
        return 2
    totals, slowest, differ = [], [], 0
    for _ in range(args.repeats):
        times = []
        for record in judged:
            scenario = scenarios.load(record["scenario"])
            measures = {**record["measures"], "history": record["history"]}
            started = time.perf_counter()
            fields = outcome_fields(scenario, measures, backends.load(record["backend"].partition("@")[0]))
            times.append((time.perf_counter() - started, record["id"]))
            differ += fields["verdict"] != record["verdict"]
        totals.append(sum(t for t, _ in times))
        slowest = sorted(times, reverse=True)[:5]
    trials = [r for r in folder.trials() if r.get("duration")]
    wall = sum(r["duration"] for r in trials)
    total = statistics.median(totals)
    print(f"{len(judged)} judged trials: checkers {total:.2f} s in all (median of {args.repeats}), "
          f"{1000 * total / len(judged):.2f} ms a trial; the trials themselves took {wall:.0f} s of worker time "
          f"({100 * total / wall:.3f} %)")
    print("slowest: " + ", ".join(f"{tid} {1000 * t:.1f} ms" for t, tid in slowest))
    print(f"verdicts that differ from the recorded ones: {differ // args.repeats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
