"""Report sections for costs: SERIALIZABLE's false conflicts, and the per-company cost table."""

from __future__ import annotations

import statistics

import pandas as pd

from lab.report import published
from lab.report.charts import ratio_chart
from lab.report.common import md_table, ok_trials, seconds_summary
from lab.report.sections import RunView, section

RATIO_TOLERANCE = 0.25  # "close": our ratio within this fraction of the post's
DESIGN_LABELS = {"no_index": "no index", "adjacent_ids": "index, adjacent ids", "spread_ids": "index, spread-out ids"}


@section(130)
def section_conflicts(run: RunView) -> str | None:
    frame = run.frame
    ok = ok_trials(frame, "conflicts")
    if ok.empty:
        return None
    rows = []
    for design, label in DESIGN_LABELS.items():
        group = ok[ok.variant == design]
        if group.empty:
            continue
        counts = [m["failed"] for m in group.measures]
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
    ten = ok[(ok.variant == "ten_companies") & ok.backend.isin(["serializable", "xact"])]  # the post's two
    if not ten.empty:
        rows, medians = [], {}
        for backend in ("serializable", "xact"):
            group = ten[ten.backend == backend]
            if group.empty:
                continue
            seconds = [m["seconds"] for m in group.measures]
            medians[backend] = statistics.median(seconds)
            post_s, post_failed = published.TEN_COMPANIES[backend]
            first = group.measures.iloc[0]
            rows.append([backend, f"{post_s} s, {post_failed} failed attempts", seconds_summary(seconds),
                         ", ".join(str(m["failed_attempts"]) for m in group.measures),
                         ", ".join(f"{m['companies_intact']}/10" for m in group.measures)])
        out += [f"Ten companies rebuilt by {first['workers']} runs at once, in the same order, "
                f"{first['rows']} rows each:", "",
                md_table(["backend", "post", "ours: time", "ours: failed attempts, per trial",
                          "companies intact"], rows), ""]
        if len(medians) == 2:
            post_ratio = published.TEN_COMPANIES["serializable"][0] / published.TEN_COMPANIES["xact"][0]
            out += [f"SERIALIZABLE / lock time ratio, medians of this run: {medians['serializable'] / medians['xact']:.2f} "
                    f"(post: {post_ratio:.2f}). Workload sizes differ from the post's, which it does not give; "
                    f"compare the direction and the retries, not the seconds.", ""]
    return "\n".join(out)


def ratio_summary(ratios: list[float]) -> str:
    """'1.56' for one repetition, '1.56 (1.40-1.70)' for several."""
    if not ratios:
        return "-"
    median = f"{statistics.median(ratios):.2f}"
    return median if len(ratios) == 1 else f"{median} ({min(ratios):.2f}-{max(ratios):.2f})"


def ratio_flag(variant: str, ratios: list[float], post_ratio: float | None) -> str:
    """close / differs / within noise: a verdict only where the spread of our paired ratios allows one."""
    if not ratios or post_ratio is None:
        return ""
    if abs(statistics.median(ratios) - post_ratio) / post_ratio <= RATIO_TOLERANCE:
        return "close"
    low, high = post_ratio * (1 - RATIO_TOLERANCE), post_ratio * (1 + RATIO_TOLERANCE)
    if all(r > high for r in ratios) or all(r < low for r in ratios):
        return "differs: " + ("2 cores here; the post's machine had more" if variant.startswith("workers")
                              else "machine, disk and scale")
    return f"within noise: ours spans {min(ratios):.2f}-{max(ratios):.2f}, no verdict"


@section(140)
def section_perf(run: RunView) -> str | None:
    frame, charts = run.frame, run.charts
    ok = ok_trials(frame, "perf")
    if ok.empty:
        return None
    by_variant = {v: g for v, g in ok.groupby("variant", sort=False)}
    base = by_variant.get("one_transaction_for_all")
    # The baseline of each repetition: a configuration is compared with the run beside it, not with a median.
    base_by_rep = {} if base is None else {i: m["seconds"] for i, m in zip(base["index"], base.measures)}
    post_base = published.PERF_SECONDS["one_transaction_for_all"]
    order = ["one_transaction_for_all", "transaction_per_company", "per_company_lock", "batch_50_sorted",
             "workers_2", "workers_4", "workers_8", "per_company_lock_copy"]
    rows, bars = [], []
    for variant in [v for v in order if v in by_variant]:
        group = by_variant[variant]
        seconds = [m["seconds"] for m in group.measures]
        ratios = [m["seconds"] / base_by_rep[i] for i, m in zip(group["index"], group.measures)
                  if base_by_rep.get(i)]
        ours_ratio = statistics.median(ratios) if ratios else None
        post = published.PERF_SECONDS.get(variant)
        post_ratio = post / post_base if post is not None else None
        flag = ratio_flag(variant, ratios, post_ratio) if post is not None else "not in the post"
        bars.append((group.measures.iloc[0]["config"], ours_ratio, post_ratio))
        rows.append([group.measures.iloc[0]["config"], "-" if post is None else f"{post:.1f} s",
                     "-" if post_ratio is None else f"{post_ratio:.2f}", seconds_summary(seconds),
                     ratio_summary(ratios), flag])
    first = ok.measures.iloc[0]
    if charts is not None:
        charts["perf.png"] = lambda path: ratio_chart(bars, path)
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
                      md_table(["configuration", "post", "post ratio", "ours", "our ratio", ""], rows), "",
                      "Our INSERT generates each company's rows on the server (insert ... select generate_series); "
                      "the COPY row sends them from the client, so it measures the transfer the INSERT rows skip.",
                      "", "![cost per configuration, relative to one transaction for all](perf.png)", ""])
