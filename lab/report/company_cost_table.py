"""Report section: every lock's own write path per company, against no lock beside it and the store's floor.

It renders the figures lab/report/company_cost.py reads (the decision reads the same ones), one row per backend the
run timed; a run without company-cost trials (every run before the scenario existed) renders nothing.
"""

from __future__ import annotations

import statistics

import pandas as pd

from lab.measures.kinds import Measured
from lab.measures.precision import Rule
from lab.measures.shapes import LockScope
from lab.declarations.post_role import PostRole
from lab.report.common import backend_with_role, md_table, ok_trials
from lab.report.company_cost import CompanyCost, company_costs
from lab.report.latency import duration
from lab.report.sections import RunView, measured_section

STORE_NAMES = {"postgres": "PostgreSQL", "mariadb": "MariaDB"}  # how a store is named in prose


def in_each_transaction(cost: CompanyCost, control: bool) -> str:
    """What the backend puts in each company's transaction, by what it declares."""
    if control:
        return "nothing: the control against itself"
    if cost.scope is LockScope.EACH_COMPANY:
        return "its lock, claim or retry"
    return "the write and its fence upsert" if cost.fenced else "the write alone"


def once_per_run(cost: CompanyCost, frame: pd.DataFrame) -> str:
    """A run-level lock's acquire + release, once per run, from the latency trials of this run."""
    if cost.scope is LockScope.EACH_COMPANY:
        return "-"
    rows = ok_trials(frame, Measured.LATENCY)
    figures = [m["acquire_release"]["p50"] for m in rows[rows.backend == cost.backend].measures
               if (m.get("acquire_release") or {}).get("p50")]
    return f"acquire + release {duration(figures[-1])}" if figures else "acquire + release: not timed in this run"


def adds(cost: CompanyCost, control: CompanyCost | None) -> str:
    """What the write path adds per company over no lock, in seconds and in the store's round trips; no figure where
    its ratios are within noise (their range holds 1 or overlaps the control's against itself), or where one
    repetition gives no range, since no verdict rests on a difference smaller than its spread."""
    if cost is control:
        return f"its own spread: {cost.ratio_low:.2f}-{cost.ratio_high:.2f}"
    if cost.repetitions < 2:
        return "one repetition: no spread, no figure"
    if cost.within_noise(control):
        return "within noise"
    added = cost.added_seconds
    sign = "+" if added >= 0 else "-"
    text = f"{sign}{duration(abs(added))}"
    if cost.round_trip:
        text += f" ({added / cost.round_trip:+.1f} round trips)"
    return text


def cost_row(cost: CompanyCost, frame: pd.DataFrame, control: CompanyCost | None) -> list[str]:
    store = STORE_NAMES.get(cost.store, cost.store)
    retries = f"; {cost.retries} retried" if cost.retries else ""
    retries += f"; its release raised in {cost.releases_raised}" if cost.releases_raised else ""
    return [cost.backend, store, in_each_transaction(cost, cost is control), once_per_run(cost, frame),
            spanned(duration(cost.seconds), duration(cost.seconds_low), duration(cost.seconds_high)),
            spanned(f"{cost.ratio:.2f}", f"{cost.ratio_low:.2f}", f"{cost.ratio_high:.2f}"), adds(cost, control),
            f"{cost.repetitions}{retries}"]


def spanned(median: str, low: str, high: str) -> str:
    """'1.52 ms (1.40 ms-1.71 ms)': a median with its min-max, or the one figure where they are all the same."""
    return median if low == high else f"{median} ({low}-{high})"


def floor_lines(costs: list[CompanyCost]) -> list[str]:
    """The physical floor of each store, sampled between the blocks of every trial on it, and the control's company
    transaction against it."""
    lines = []
    for store in dict.fromkeys(c.store for c in costs):
        on_it = [c for c in costs if c.store == store]
        trips = [c.round_trip for c in on_it if c.round_trip]
        commits = [c.commit for c in on_it if c.commit]
        if not (trips and commits):
            continue
        trip, commit = statistics.median(trips), statistics.median(commits)
        control = statistics.median(c.baseline_seconds for c in on_it)
        lines.append(f"- {STORE_NAMES.get(store, store)}: a `select 1` round trip {duration(trip)}, a one-row commit "
                     f"{duration(commit)}; a company's transaction with no lock {duration(control)}, "
                     f"{control / commit:.1f} one-row commits (medians over its backends' trials)")
    return lines


@measured_section(145, Measured.COMPANY_COST)
def section_company_cost(run: RunView, ok: pd.DataFrame) -> str | None:
    costs = company_costs(run.frame)
    if not costs:
        return None
    no_lock = backend_with_role(ok, PostRole.NO_LOCK)
    control = costs.get(no_lock) if no_lock else None
    rows = [cost_row(cost, run.frame, control) for cost in costs.values()]
    left_out = sorted(set(ok.backend) - set(costs))
    return "\n".join([
        "## What each lock's own write costs per company", "",
        intro(next(iter(costs.values())).companies, int(ok.measures.iloc[0]["rows"])), "",
        *repetitions_line(run.meta, set(ok.scenario), list(costs.values())),
        md_table(["backend", "writes on", "in each company's transaction", "once per run", "per company",
                  "ratio to no lock", "adds per company", "repetitions"], rows), "",
        "The floor, sampled between the blocks of every trial:", "", *floor_lines(list(costs.values())), "",
        *([f"Not shown: {', '.join(left_out)} (a transaction failed, or a company was not whole after the clock; "
           f"see the outcomes).", ""] if left_out else [])])


def intro(companies: int, rows: int) -> str:
    """How the figures were made, in one paragraph."""
    return (
        f"Every backend's own write path, timed: each company rebuilt in a transaction of its own through the "
        f"backend's rebuild() (its lock inside the write, a claimed row or marker, SERIALIZABLE's retry loop, a "
        f"fenced lock's fence upsert), beside the same companies rebuilt with no lock on a table of their own on the "
        f"same store (a MariaDB lock against MariaDB with no lock). Per trial and side {companies} companies of "
        f"{rows} rows, each table fresh and vacuumed; the two sides take turns in blocks of companies, so a "
        f"neighbour's burst slows both alike, and the trial's ratio is the median of its adjacent blocks' ratios. "
        f"Each figure is the median with min-max over repetitions, each repetition running every backend once in an "
        f"order of its own; *per company* and the ratio are medians of their own (a trial's ratio pairs its blocks, "
        f"not its medians). A lock held across the run is taken once before the clock: its row times the write "
        f"alone or with its fence upsert, and its acquire + release once per run is the latency scenario's figure. "
        f"Each key is the trial's own, so a rebuild is the company's first under its lock (a parent, fence or job "
        f"row is made in the transaction). The no-lock control is timed against itself too: its ratios are the "
        f"method's own spread. *adds*: the control's median times the ratio less 1, and that in round trips of the "
        f"store's floor; *within noise* where the ratios' range holds 1 or overlaps the control's own. The lab's "
        f"writes pool checks each connection it hands out with a `select 1`, on both sides alike; a lock that writes "
        f"on a connection of its own skips that check, so its ratio may fall below 1. "
        f"Reproduce: `lab run --backend all --scenario cost_per_company`.")


def repetitions_line(meta: dict, scenarios: set[str], costs: list[CompanyCost]) -> list[str]:
    """How each backend's repetitions ended under the rule the run recorded (meta.json `precision`, by the scenario
    that measured them): how many reached its spread, and which stopped at the cap with what spread."""
    recorded = meta.get("precision") or {}
    outcome = next((recorded[name] for name in sorted(scenarios) if name in recorded), None)
    if not outcome:
        return []
    rule = Rule(tolerance=outcome["tolerance"], floor=outcome["floor"], cap=outcome["cap"])
    wide = [(c, spread) for c in costs if (spread := (c.ratio_high - c.ratio_low) / 2 / c.ratio) > rule.tolerance]
    line = (f"Repetitions: each backend's {rule.describe()} (its ratios to no lock): "
            f"{len(costs) - len(wide)} of {len(costs)} within +-{rule.tolerance:.0%}")
    if wide:
        line += "; wider: " + ", ".join(f"{c.backend} (+-{spread:.1%} over {c.repetitions})" for c, spread in wide)
    return [line + ".", ""]
