"""Report sections for costs: SERIALIZABLE's false conflicts, and the per-company cost table."""

from __future__ import annotations

import statistics

import pandas as pd

from lab.measures.kinds import Measured
from lab.measures.precision import Rule, describe
from lab.declarations.post_role import PostRole
from lab.report import published
from lab.report.chart_cache import Drawing
from lab.report.charts import ratio_chart
from lab.report.common import (Verdict, backend_with_role, md_table, seconds_summary, verdict_mark,
                               with_role)
from lab.report.sections import RunView, measured_section

RATIO_TOLERANCE = 0.25  # "close": our ratio within this fraction of the post's
DESIGN_LABELS = {"no_index": "no index", "adjacent_ids": "index, adjacent ids", "spread_ids": "index, spread-out ids"}
PERF_BASE = "one_transaction_for_all"
TEN_COMPANIES = (PostRole.SERIALIZABLE, PostRole.METHOD_4)  # the post's two, by the role a backend declares


def conflict_counts(ok: pd.DataFrame, design: str) -> list[int]:
    """Failed transactions of the eight, per trial of a table design (ok: the run's ok conflicts trials)."""
    return [m["failed"] for m in ok[ok.variant == design].measures]


def ten_companies(ok: pd.DataFrame) -> dict[PostRole, list[dict]]:
    """The post's role -> the measures of its backend's ten-companies trials, for the post's two that ran."""
    ten = ok[ok.variant == "ten_companies"]
    return {role: list(with_role(ten, role).measures) for role in TEN_COMPANIES if not with_role(ten, role).empty}


def ten_names(ok: pd.DataFrame) -> dict[PostRole, str]:
    """The post's two roles -> the name of the backend playing each in this run (the role's own name if none)."""
    return {role: backend_with_role(ok, role) or role.value for role in TEN_COMPANIES}


def ten_companies_ratio(ten: dict[PostRole, list[dict]]) -> tuple[float, list[float]] | None:
    """SERIALIZABLE / lock time: the ratio of the medians, and every trial's over every trial's (the trials
    are not paired, so every pairing is a ratio the run could have shown); None unless both ran."""
    if set(ten) != set(TEN_COMPANIES):
        return None
    ser, lock = ([m["seconds"] for m in ten[b]] for b in TEN_COMPANIES)
    return statistics.median(ser) / statistics.median(lock), [s / x for s in ser for x in lock]


@measured_section(130, Measured.CONFLICT_COST)
def section_conflicts(run: RunView, ok: pd.DataFrame) -> str | None:
    rows = []
    for design, label in DESIGN_LABELS.items():
        group = ok[ok.variant == design]
        if group.empty:
            continue
        counts = conflict_counts(ok, design)
        post = published.CONFLICT_FAILURES[design]
        flag = "match" if set(counts) == {post} else \
            "differs: predicate locks follow index pages, so table size and id spacing decide (see the design)"
        rows.append([label, f"{post} of 8", ", ".join(f"{c} of 8" for c in counts), flag])
    out = ["## SERIALIZABLE without a lock: false conflicts", "",
           "Eight different companies rebuilt at once under SERIALIZABLE, no retry; every transaction deletes, "
           "waits for the other seven to delete, then inserts and commits. *match*: every trial failed exactly the "
           "post's count. Reproduce: "
           "`lab run --backend serializable,xact --scenario conflicts`.", "",
           md_table(["table design", "post: failed", "ours: failed, per trial", ""], rows), ""]
    ten, names = ten_companies(ok), ten_names(ok)
    if ten:
        rows = []
        for role, measures in ten.items():
            seconds = [m["seconds"] for m in measures]
            post_s, post_failed = published.TEN_COMPANIES[role]
            first = measures[0]
            verdict = failed_attempts_verdict(ten, role)
            rows.append([names[role], f"{post_s} s, {post_failed} failed attempts", seconds_summary(seconds),
                         ", ".join(str(m["failed_attempts"]) for m in measures)
                         + ("" if verdict is Verdict.MATCHES else f" ({verdict_mark(verdict)} from the post's)"),
                         ", ".join(f"{m['companies_intact']}/10" for m in measures)])
        out += [f"Ten companies rebuilt by {first['workers']} runs at once, in the same order, "
                f"{first['rows']} rows each:", "",
                md_table(["backend", "post", "ours: time", "ours: failed attempts, per trial",
                          "companies intact"], rows), ""]
        ratio = ten_companies_ratio(ten)
        if ratio is not None:
            out += [f"SERIALIZABLE / lock time ratio, medians of this run: {ratio[0]:.2f} "
                    f"(post: {post_ten_ratio():.2f}): {verdict_mark(ten_companies_verdict(ratio))} (the cost table's "
                    f"tolerance, within {RATIO_TOLERANCE:.0%}; any trial over any: "
                    f"{min(ratio[1]):.2f}-{max(ratio[1]):.2f}). "
                    f"Workload sizes differ from the post's, which it does not give; "
                    f"compare the direction and the retries, not the seconds.", ""]
    return "\n".join(out)


def ratio_summary(ratios: list[float]) -> str:
    """'1.56' for one repetition, '1.56 (1.40-1.70)' for several."""
    if not ratios:
        return "-"
    median = f"{statistics.median(ratios):.2f}"
    return median if len(ratios) == 1 else f"{median} ({min(ratios):.2f}-{max(ratios):.2f})"


def failed_attempts_verdict(ten: dict[PostRole, list[dict]], role: PostRole) -> Verdict:
    """A count matches when every trial's failed attempts are the post's for the same ten companies."""
    return Verdict.MATCHES if {m["failed_attempts"] for m in ten[role]} == {published.TEN_COMPANIES[role][1]} \
        else Verdict.DIFFERS


def ten_companies_verdict(ratio: tuple[float, list[float]]) -> Verdict:
    """The ratio of medians against the post's, every pairing of trials as its spread (ratio_verdict)."""
    verdict = ratio_verdict(ratio[1], post_ten_ratio(), centre=ratio[0])
    assert verdict is not None  # both sides are there: the ratio came from trials, the post's is published
    return verdict


def post_ten_ratio() -> float:
    """The post's SERIALIZABLE / lock time for the same ten companies (8.8 s / 5.4 s)."""
    serializable, lock = (published.TEN_COMPANIES[role][0] for role in TEN_COMPANIES)
    return serializable / lock


def post_perf_ratio(variant: str, base: str = PERF_BASE) -> float | None:
    """The post's seconds of a configuration over its base's (None: a configuration the post did not run)."""
    post = published.PERF_SECONDS.get(variant)
    return None if post is None else post / published.PERF_SECONDS[base]


def paired_ratios(ok: pd.DataFrame, variant: str, base: str = PERF_BASE) -> list[float]:
    """A perf configuration's seconds over its base's in the same repetition, one ratio per repetition
    (ok: the run's ok perf trials): a configuration is compared with the run beside it, not with a median."""
    base_by_rep = {i: m["seconds"] for i, m in zip(*_by_rep(ok, base))}
    return [m["seconds"] / base_by_rep[i] for i, m in zip(*_by_rep(ok, variant)) if base_by_rep.get(i)]


def _by_rep(ok: pd.DataFrame, variant: str) -> tuple[list, list]:
    group = ok[ok.variant == variant]
    return list(group["index"]), list(group.measures)


def ratio_verdict(ratios: list[float], post_ratio: float | None, centre: float | None = None) -> Verdict | None:
    """Matches when our ratio (centre; the median of ratios unless given) is within RATIO_TOLERANCE of the
    post's; differs when every one of our ratios lies beyond that band on the same side; else within noise.
    None when there is nothing to compare."""
    if not ratios or post_ratio is None:
        return None
    centre = statistics.median(ratios) if centre is None else centre
    if abs(centre - post_ratio) / post_ratio <= RATIO_TOLERANCE:
        return Verdict.MATCHES
    low, high = post_ratio * (1 - RATIO_TOLERANCE), post_ratio * (1 + RATIO_TOLERANCE)
    if all(r > high for r in ratios) or all(r < low for r in ratios):
        return Verdict.DIFFERS
    return Verdict.WITHIN_NOISE


def ratio_flag(variant: str, ratios: list[float], post_ratio: float | None) -> str:
    """close / differs / within noise: a verdict only where the spread of our paired ratios allows one."""
    verdict = ratio_verdict(ratios, post_ratio)
    if verdict is None:
        return ""
    if verdict is Verdict.MATCHES:
        return "close"
    if verdict is Verdict.DIFFERS:
        return "differs: " + ("2 cores here; the post's machine had more" if variant.startswith("workers")
                              else "machine, disk and scale")
    return f"within noise: ours spans {min(ratios):.2f}-{max(ratios):.2f}, no verdict"


def _recorded_precision(meta: dict, scenarios: set[str]) -> dict | None:
    """How precise the run recorded the cost figures to (meta.json `precision`, by the scenario that measured them)."""
    recorded = meta.get("precision", {})
    return next((recorded[name] for name in sorted(scenarios) if name in recorded), None)


@measured_section(140, Measured.COST)
def section_perf(run: RunView, ok: pd.DataFrame) -> str | None:
    charts = run.charts
    by_variant = {v: g for v, g in ok.groupby("variant", sort=False)}
    order = ["one_transaction_for_all", "transaction_per_company", "per_company_lock", "batch_50_sorted",
             "workers_2", "workers_4", "workers_8", "per_company_lock_copy"]
    rows, bars = [], []
    for variant in [v for v in order if v in by_variant]:
        group = by_variant[variant]
        seconds = [m["seconds"] for m in group.measures]
        ratios = paired_ratios(ok, variant)
        ours_ratio = statistics.median(ratios) if ratios else None
        post = published.PERF_SECONDS.get(variant)
        post_ratio = post_perf_ratio(variant)
        flag = ratio_flag(variant, ratios, post_ratio) if post is not None else "not in the post"
        bars.append((group.measures.iloc[0]["config"], ours_ratio, post_ratio))
        rows.append([group.measures.iloc[0]["config"], "-" if post is None else f"{post:.1f} s",
                     "-" if post_ratio is None else f"{post_ratio:.2f}", seconds_summary(seconds),
                     ratio_summary(ratios), flag])
    first = ok.measures.iloc[0]
    if charts is not None:
        charts["perf.png"] = Drawing(ratio_chart, (bars,))
    return "\n".join(["## What the lock costs per company", "",
                      f"Every configuration rebuilds all {first['companies']} companies of {first['rows'] // first['companies']} "
                      f"rows ({first['rows']:,} rows, indexed); the post ran {published.PERF_COMPANIES} companies "
                      f"(1,320,000 rows). Each trial rebuilds a fresh, vacuumed table; each repetition runs every "
                      f"configuration once in its own shuffled order, and a configuration's ratio is to the first "
                      f"row's time in the same repetition (median, min-max over repetitions). *close*: our median "
                      f"ratio within {RATIO_TOLERANCE:.0%} of the post's; *differs*: every repetition's ratio more "
                      f"than {RATIO_TOLERANCE:.0%} away, on the same side; *within noise*: neither, so no verdict. "
                      f"Reproduce: `lab run --backend none,xact --scenario perf` "
                      f"(`--profile full` for the post's size).", "",
                      *_precision(_recorded_precision(run.meta, set(ok.scenario))),
                      md_table(["configuration", "post", "post ratio", "ours", "our ratio", ""], rows), "",
                      "Our INSERT generates each company's rows on the server (insert ... select generate_series); "
                      "the COPY row sends them from the client, so it measures the transfer the INSERT rows skip.",
                      "", "![cost per configuration, relative to one transaction for all](perf.png)", ""])


def _precision(outcome: dict | None) -> list[str]:
    """How the repetitions ended, where the run recorded it (older runs repeated a fixed count)."""
    if not outcome:
        return []
    rule = Rule(outcome["tolerance"], outcome["floor"], outcome["cap"])
    return [f"Repetitions: {rule.describe()} (every configuration's ratio to the first row's): "
            f"{describe(outcome)}.", ""]
