"""`lab report --compare A B`: what changed between two runs, outcome by outcome (contacts no server)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from lab.checkers.outcomes import Safety, exercised_of, findings, outcome_groups, outcome_text
from lab.measures.kinds import Measured
from lab.measures.precision import spread
from lab.report.common import md_table
from lab.report.declared import measured_of
from lab.records.results import RunFolder


def _servers(folder: RunFolder) -> str:
    services = folder.meta().get("services", {})
    return ", ".join(f"{name} {info.get('version')} ({'embedded' if info.get('embedded') else 'external'})"
                     for name, info in sorted(services.items()))


def compare(a: RunFolder, b: RunFolder) -> str:
    """A Markdown table of every (scenario, backend, variant) whose findings differ (counts aside)."""
    left, right = outcome_groups(a.trials(), a.meta()), outcome_groups(b.trials(), b.meta())
    keys = list(left) + [k for k in right if k not in left]

    def found(groups, key):  # compared as typed findings from the records, never by reading the text
        return findings(groups[key]) if key in groups else frozenset({"not run"})

    def shown(groups, key):
        return outcome_text(groups[key]) if key in groups else "not run"

    changed = [[*k, shown(left, k), shown(right, k)] for k in keys if found(left, k) != found(right, k)]
    same = len(keys) - len(changed)
    flipped = [[*k, ", ".join(sorted(safety_set(left[k]))), ", ".join(sorted(safety_set(right[k])))] for k in keys
               if k in left and k in right and safety_set(left[k]) and safety_set(right[k])
               and safety_set(left[k]) != safety_set(right[k])]
    out = [f"# {a.run_id} against {b.run_id}", "",
           f"- A: {a.run_id}: {_servers(a)}, profile {a.meta().get('profile')}",
           f"- B: {b.run_id}: {_servers(b)}, profile {b.meta().get('profile')}", "",
           f"{len(changed)} outcomes differ; {same} are the same.", ""]
    if changed:
        out += [md_table(["scenario", "backend", "variant", f"A ({a.run_id})", f"B ({b.run_id})"], changed), ""]
    out += [f"{len(flipped)} safety verdicts flipped (cells run in both whose trials' safety differs; a change of "
            f"words or figures alone is not a flip, nor a trial that decided nothing: untested, unknown, or safe "
            f"while its fault never took the lock away).", ""]
    if flipped:
        out += [md_table(["scenario", "backend", "variant", "A: safety", "B: safety"], flipped), ""]
    moved = figure_moves(left, right, measured_of(a.meta()), measured_of(b.meta()))
    if moved:
        out += [f"Repeated figures in both runs, B against A (*within*: B's median moved by no more than the "
                f"tolerance it was measured to: the rules' {FIGURE_TOLERANCE:.0%}, or, where a figure's repetitions "
                f"stopped wider than that (at their cap, or once the verdict they serve was settled), the wider of "
                f"its two runs' spreads, half the range of its ratios over their median):", "",
                md_table(["figure", "A", "B", "moved", "tolerance", ""], moved), ""]
    return "\n".join(out)


# The precision rules hold each repeated figure's paired ratios within +-10% of their median
# (lab/measures/precision.py; scenarios/perf.py, scenarios/whynot/throughput.py, scenarios/latency.py).
FIGURE_TOLERANCE = 0.10
PERF_BASE = "one_transaction_for_all"


def safety_set(records: list[dict]) -> frozenset[str]:
    """The decided safety of a cell's finished trials (safe, unsafe), as the records typed it: what two runs can
    contradict each other on. A trial that decided nothing is left out: untested (the lock was lost but nothing
    was written after it), unknown (an indeterminate outcome), or safe while its fault never took the lock away
    (exercised false: no pass, as the matrix shows it). A cell of only such trials flips nothing; a failure
    found stands whatever the fault did."""
    return frozenset(r["safety"] for r in records if r["status"] == "ok" and r.get("safety") in DECIDED
                     and not (r["safety"] == Safety.SAFE.value and exercised_of(r) is False))


# The safeties a trial can decide; the others (untested, unknown) say that it did not.
DECIDED = frozenset({Safety.SAFE.value, Safety.UNSAFE.value})


@dataclass(frozen=True)
class Figure:
    """A repeated figure of one run: the median of its paired ratios and their spread (half their range over the
    median), the precision the run measured it to."""

    median: float
    spread: float


def _figures(groups: dict[tuple, list[dict]], kinds: dict[str, Measured]) -> dict[str, Figure]:
    """The repeated figures of a run by name: the cost table's paired ratios to one transaction for all, whynot's
    speedups from 1 to 4 workers, and each lock's acquire + release over its server's floor (its blocks' spread,
    where the run recorded it). kinds: what each scenario measures (lab/report/declared.measured_of)."""
    figures: dict[str, Figure] = {}
    costs: dict[tuple[str, str], dict] = {}
    for (scenario, _, v), records in groups.items():
        if kinds.get(scenario) is Measured.COST:
            costs[scenario, v] = {r["index"]: r["measures"]["seconds"] for r in records if r["status"] == "ok"}
    for (scenario, variant), seconds in costs.items():
        base = costs.get((scenario, PERF_BASE), {})
        ratios = [s / base[i] for i, s in seconds.items() if base.get(i)]
        if variant != PERF_BASE and ratios:
            figures[f"{scenario} {variant} / {PERF_BASE}"] = Figure(statistics.median(ratios), spread(ratios) or 0.0)
    for (scenario, backend, variant), records in groups.items():
        ok = [r["measures"] for r in records if r["status"] == "ok" and r.get("measures")]
        kind = kinds.get(scenario)
        if kind is Measured.ALTERNATIVES and variant == "throughput" and ok:
            speedups = [s for m in ok for s in m["speedups"]]
            figures[f"{scenario} throughput {backend}: speedup 1 to 4 workers"] = Figure(
                statistics.median(speedups), spread(speedups) or 0.0)
        if kind is Measured.LATENCY and ok and ok[0].get("ratio"):
            spreads = [m.get("precision", {}).get("acquire_release", {}).get("spread", 0.0) for m in ok]
            figures[f"{scenario} {backend}: acquire + release / floor"] = Figure(
                statistics.median(m["ratio"] for m in ok), max(spreads))
    return figures


def figure_moves(left: dict[tuple, list[dict]], right: dict[tuple, list[dict]], left_kinds: dict[str, Measured],
                 right_kinds: dict[str, Measured]) -> list[list[str]]:
    """One row per repeated figure both runs have: its two medians, how far B moved from A, the tolerance it is
    held to (FIGURE_TOLERANCE, or the wider of its two spreads where either run measured it less precisely), and
    within or beyond."""
    a, b = _figures(left, left_kinds), _figures(right, right_kinds)
    rows = []
    for name in [n for n in a if n in b]:
        moved = b[name].median / a[name].median - 1 if a[name].median else float("inf")
        tolerance = max(FIGURE_TOLERANCE, a[name].spread, b[name].spread)
        rows.append([name, f"{a[name].median:.3f}", f"{b[name].median:.3f}", f"{moved:+.1%}",
                     f"+-{tolerance:.0%}" + ("" if tolerance == FIGURE_TOLERANCE else " (spread)"),
                     "within" if abs(moved) <= tolerance else "beyond"])
    return rows
