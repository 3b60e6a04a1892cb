"""Report section for the latency scenario: what each lock costs, against its server's floor and against
the bare library call it wraps."""

from __future__ import annotations

import statistics

import pandas as pd

from lab.measures.kinds import Measured
from lab.measures.precision import Rule
from lab.report.chart_cache import Drawing
from lab.report.charts import latency_chart
from lab.report.common import md_table
from lab.report.sections import RunView, measured_section

NO_BARE = "no bare call declared"
NOT_MEASURED = "not measured (run predates it)"

THROUGHPUT_COLUMNS = [((1, 1), "1 worker"), ((2, 1), "2 on 1 key"), ((8, 1), "8 on 1 key"),
                      ((2, 2), "2 on 2 keys"), ((8, 8), "8 on 8 keys")]


def duration(seconds: float | None) -> str:
    """'412 µs' below a millisecond, '4.05 ms' above: the same input always gives the same text."""
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:.0f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def spread(figure: dict) -> str:
    """'p50 / p99 / max' of a figure the scenario recorded."""
    if not figure or not figure.get("n"):
        return "-"
    return " / ".join(duration(figure[k]) for k in ("p50", "p99", "max"))


def _round_trips(counted: dict) -> str:
    if not counted:
        return "-"
    out = f"{counted['acquire']:g} + {counted['release']:g}"
    commands = counted.get("server_commands_per_pair")
    if commands:
        out += " (server ran " + ", ".join(f"{name} {count:g}" for name, count in commands.items()) + ")"
    if counted.get("refused"):  # older runs did not record it
        out += f"; {counted['refused']} uncontended acquires refused, not counted"
    return out


def versus_bare(measures: dict) -> str:
    """The 'vs bare library call' cell: the ratio, and meets / misses the goal where the spread allows it.

    The trial recorded its outcome; the cell prints it only when the recorded figures bear it out (the
    median's ratio and every block's on the same side of the goal), so a record that says more than its
    spread supports renders as no verdict.
    """
    if "bare" not in measures:
        return NOT_MEASURED
    bare = measures["bare"]
    if bare is None:
        return NO_BARE
    ratio, goal, blocks = bare["ratio_to_bare"], bare["goal"], bare["block_ratios"]
    below = bool(blocks) and ratio <= goal and all(r <= goal for r in blocks)
    above = bool(blocks) and ratio > goal and all(r > goal for r in blocks)
    if bare["meets_goal"] is True and below:
        return f"{ratio:.2f} (meets <= {goal:g})"
    if bare["meets_goal"] is False and above:
        return f"{ratio:.2f} (misses <= {goal:g})"
    span = f"{min(blocks):.2f}-{max(blocks):.2f}" if blocks else "none"
    return f"{ratio:.2f} (within noise: blocks {span}, no verdict)"


def _round_trips_with_bare(measures: dict) -> str:
    out = _round_trips(measures.get("round_trips") or {})
    counted = (measures.get("bare") or {}).get("round_trips")
    return out if not counted else f"{out}; bare: {counted['acquire']:g} + {counted['release']:g}"


def _precision_lines(trials: list[tuple[str, dict]]) -> list[str]:
    """How each repeated figure was ended, where the run recorded it (older runs repeated fixed counts and
    windows): the rules, and per backend the repetitions each figure took."""
    recorded = [(backend, m) for backend, m in trials if m.get("precision")]
    if not recorded:
        return []
    first = recorded[0][1]

    def rule(outcome: dict) -> str:
        return Rule(outcome["tolerance"], outcome["floor"], outcome["cap"]).describe()

    slices = first["throughput"][0]["precision"]
    lines = [f"Each figure is repeated until precise enough (lab/measures/precision.py): acquire + release in blocks, "
             f"each block's ratio to the floor (and to the bare call) paired within it, "
             f"{rule(first['precision']['acquire_release'])}; handoffs in blocks, each block's median, "
             f"{rule(first['precision']['handoff'])}; throughput in slices of the window, each slice's grants per "
             f"second, {rule(slices)}. Repetitions each took (blocks of pairs / blocks of handoffs / slices per "
             f"throughput configuration), *cap* where the spread was still wider at the cap"
             + _out_of_time(recorded)
             + ":", ""]
    for backend, m in recorded:
        def taken(outcome: dict) -> str:
            ended = "" if outcome["reached"] else " (time)" if outcome.get("out_of_time") else " (cap)"
            return f"{outcome['repetitions']}{ended}"
        lines.append(f"- {backend}: {taken(m['precision']['acquire_release'])} / "
                     f"{taken(m['precision']['handoff'])} / "
                     + ", ".join(taken(t["precision"]) for t in m["throughput"]))
    return lines + [""]


def _out_of_time(recorded: list[tuple[str, dict]]) -> str:
    """The clause for throughput configurations whose slices stopped at their time budget ('' where none did)."""
    budgets = [t.get("budget_s") for _, m in recorded for t in m["throughput"] if t["precision"].get("out_of_time")]
    if not budgets:
        return ""
    return (f", *time* where the throughput slices stopped at their time budget ({max(budgets):g} s): a contended "
            f"acquire that blocks holds its slice open, and the grants per second are over the seconds taken")


def _medians(figures: list[dict]) -> str:
    medians = [f["p50"] for f in figures if f.get("n")]
    if not medians:
        return "-"
    return f"{duration(statistics.median(medians))} ({duration(min(medians))}-{duration(max(medians))})"


@measured_section(150, Measured.LATENCY)
def section_latency(run: RunView, ok: pd.DataFrame) -> str | None:
    charts = run.charts
    ok = ok.sort_values(["backend_pos", "index"], kind="stable").drop_duplicates("backend", keep="last")
    rows, throughput_rows, bars, bare_calls = [], [], [], []
    floors: dict = {}
    for backend, m in zip(ok.backend, ok.measures):
        floor = m["floors"][m["floor"]]
        rows.append([backend, m["lock_service"], spread(m["acquire_release"]),
                     f"{duration(floor.get('p50'))} ({m['floor']})", "-" if m["ratio"] is None else f"{m['ratio']:.2f}",
                     versus_bare(m), spread(m["handoff"]), _round_trips_with_bare(m)])
        if m.get("bare"):
            bare_calls.append(f"- {backend}: {m['bare']['call']}, {spread(m['bare']['acquire_release'])}")
        by_config = {(t["workers"], t["keys"]): t for t in m["throughput"]}
        throughput_rows.append([backend, *[f"{by_config[c]['grants_per_s']:.0f}" if c in by_config else "-"
                                           for c, _ in THROUGHPUT_COLUMNS]])
        bars.append((backend, m["acquire_release"].get("p50"), m["handoff"].get("p50"), floor.get("p50")))
        for name, figure in m["floors"].items():
            floors.setdefault((m["lock_service"], name), []).append(figure)
    floor_rows = [[service, name, spread(figures[0]), _medians(figures), str(len(figures))]
                  for (service, name), figures in floors.items()]
    first = ok.measures.iloc[0]
    if charts is not None:
        charts["latency.png"] = Drawing(latency_chart, (bars,))
    return "\n".join([
        "## What each lock costs", "",
        f"Each backend alone (one trial at a time), one instance acquiring and releasing "
        f"{first['iterations']} times with nothing in its way; a sample of its server's floor is taken before "
        f"every pair, on the same kind of connection (PostgreSQL: SQLAlchemy on psycopg2, AUTOCOMMIT; Redis: "
        f"redis-py and a raw socket; etcd: pyetcd), so a noisy neighbour slows both alike. *ratio*: the "
        f"median acquire + release over the median floor of its own server. *handoff*: from the holder's "
        f"release call to the waiter's grant, the waiter being {first['waits']}. *round trips*: requests the "
        f"client sent per acquire + per release, counted by a loopback proxy on the lock's connection "
        f"(median of {first['round_trips']['pairs']} pairs); for Redis, the commands the server ran per pair "
        f"(INFO commandstats, a script's own calls included). Figures are median / p99 / max. "
        f"Reproduce: `lab run --backend all --scenario latency`.", "",
        _goal_sentence(ok.measures), "",
        *_precision_lines(list(zip(ok.backend, ok.measures))),
        md_table(["backend", "lock server", "acquire + release", "floor (p50)", "ratio", "vs bare library call",
                  "handoff", "round trips"], rows), "",
        *(["The bare library call each backend was timed against (its acquire + release, median / p99 / max):",
           "", *bare_calls, ""] if bare_calls else []),
        "The floors, measured in every trial on that server (the first trial's spread, then the median of "
        "every trial's median with their min-max):", "",
        md_table(["server", "floor", "first trial: median / p99 / max", "medians of all trials", "trials"],
                 floor_rows), "",
        "Grants per second (acquire + release) with k workers, each with its own instance and connection, "
        "threads of one Python process (so 8 workers also measure the interpreter on these cores):", "",
        md_table(["backend", *[label for _, label in THROUGHPUT_COLUMNS]], throughput_rows), "",
        "![acquire + release and handoff per backend, with its server's floor](latency.png)", ""])


def _goal_sentence(measures) -> str:
    """The goal, with the rule behind the table's meets / misses, from the figures the trials recorded."""
    recorded = [m["bare"] for m in measures if m.get("bare")]
    if not recorded:
        return ("No trial here compared its backend with a bare library call: " +
                ("none of these backends declares one." if any("bare" in m for m in measures)
                 else "the run predates that measurement."))
    goal, blocks = recorded[0]["goal"], len(recorded[0]["block_ratios"])
    return (f"Goal: a lab backend adds no round trip of its own to the library call it wraps, so its median "
            f"acquire + release is at most {goal:g} times the bare call's, measured in the same run: the bare "
            f"call (the same lock work made with the library alone, on a connection of the same kind and a key "
            f"of its own) is timed beside each of the backend's own pairs, first on every other iteration, and "
            f"its round trips are counted through the same proxy. *vs bare library call*: the backend's median "
            f"over the bare call's; *meets* / *misses* only when the iterations cut into {blocks} consecutive "
            f"blocks give ratios all on the same side of {goal:g} as that median, else *within noise* with the "
            f"blocks' span and no verdict; *{NO_BARE}*: the backend names no library call it wraps.")
