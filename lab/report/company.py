"""Report sections for the company workload: overlap, the kill test, and the rules the lock depends on."""

from __future__ import annotations

import re
import statistics

import pandas as pd

from lab.checkers.outcomes import outcome_text
from lab.measures.kinds import Measured
from lab.declarations.post_role import PostRole
from lab.report import published
from lab.report.common import backend_with_role, md_table, side_by_side
from lab.report.sections import RunView, measured_section


def _mask_waits(line: str) -> str:
    return re.sub(r"waited [0-9.]+s", "waited ?s", line)


def same_waits_aside(post: list[str], ours: list[str]) -> bool:
    """Whether our lines are the post's, waits aside (the post: "compare ..., apart from the waits")."""
    return [_mask_waits(line) for line in post] == [_mask_waits(line) for line in ours]


def run_line(run: dict) -> str:
    """One run of a two-run trial in the post's company_design.py format."""
    if run["outcome"] == "refused":
        return f"{run['run']}: refused (another run holds the lock)"
    if run["outcome"] == "failed":
        return f"{run['run']}: failed ({run['error']}), waited {run['waited']:.1f}s"
    if run["outcome"] == "indeterminate":  # the commit's result never came back
        return f"{run['run']}: indeterminate (commit result unknown), waited {run['waited']:.1f}s"
    return f"{run['run']}: {run['outcome']}, waited {run['waited']:.1f}s, deleted {run['deleted']}"


def overlap_lines(measures: dict) -> list[str]:
    return [run_line(r) for r in measures["runs"]] + [f"rows afterwards: {measures['rows_final']}"]


def overlap_finals(ok: pd.DataFrame, backend: str, variant: str = "two_runs") -> list[int]:
    """Rows afterwards, per trial, of two rebuilds of one company (ok: the run's ok overlap trials)."""
    group = ok[(ok.backend == backend) & (ok.variant == variant)]
    return [m["rows_final"] for m in group.measures]


def overlap_matches(finals: list[int], post: int) -> bool:
    """A count matches when every trial ended at the post's."""
    return set(finals) == {post}


def repeatable_read_failures(ok: pd.DataFrame) -> dict[str, tuple[int, int, list[float]]]:
    """backend -> (trials whose waiting run failed with the post's REPEATABLE READ error, trials, that run's
    waits) for every backend run under REPEATABLE READ (ok: the run's ok overlap trials)."""
    rr = ok[ok.variant == "repeatable_read"]
    out = {}
    for backend, group in rr.groupby("backend", sort=False):
        waiters = [m["runs"][1] for m in group.measures]
        failed = sum(published.REPEATABLE_READ_ERROR in (r["error"] or "") for r in waiters)
        out[backend] = (failed, len(group), [r["waited"] for r in waiters])
    return out


@measured_section(100, Measured.OVERLAP)
def section_overlap(run: RunView, ok: pd.DataFrame) -> str | None:
    rows, blocks = [], []
    for (backend, variant), group in ok.groupby(["backend", "variant"], sort=False):
        finals = overlap_finals(ok, backend, variant)
        first = group.measures.iloc[0]
        role = group.post_role.iloc[0]
        post = published.OVERLAP_ROWS.get(role) if variant == "two_runs" else None
        verdict = "" if post is None else (" (match)" if overlap_matches(finals, post) else " **(MISMATCH)**")
        rows.append([backend, first["isolation"], ", ".join(map(str, finals)) + verdict,
                     "-" if post is None else str(post), outcome_text(group.to_dict("records"))])
        if variant == "two_runs" and role in published.OVERLAP_LINES:
            blocks += [f"**{published.OVERLAP_TITLES[role]}** (waits aside)", "",
                       *side_by_side(published.OVERLAP_LINES[role], overlap_lines(first), _mask_waits), ""]
    out = ["## Two rebuilds of one company at once", "",
           "Run1 deletes the company's 250 rows and holds its transaction open; run2 starts meanwhile. "
           "Reproduce: `lab run --scenario overlap`.", "",
           md_table(["backend", "isolation", "rows afterwards, per trial", "post", "outcome"], rows), "", *blocks]
    rr = repeatable_read_failures(ok)
    if rr:
        out += [_repeatable_read_line(rr, backend_with_role(ok, PostRole.METHOD_4)), ""]
    return "\n".join(out)


def _repeatable_read_line(rr: dict[str, tuple[int, int, list[float]]], lock: str | None) -> str:
    """Rule 1 for the post's lock (lock: the backend declaring method 4), then the other backends run under
    REPEATABLE READ, each counted over its own trials: the post's figure is about the advisory lock alone."""
    error = published.REPEATABLE_READ_ERROR
    others = ", ".join(f"{b} {failed} of {n}" for b, (failed, n, _) in rr.items() if b != lock)
    if lock in rr:
        failed, n, waits = rr[lock]
        line = (f"Rule 1, REPEATABLE READ with the lock ({lock}): the waiting run failed with *{error}* in {failed} "
                f"of {n} trials, after a median wait of {statistics.median(waits):.1f} s (post: fails after the wait).")
        return line + (f" The other backends run under REPEATABLE READ are not the post's lock; their waiting "
                       f"run failed with that error in: {others}." if others else "")
    return (f"Rule 1, REPEATABLE READ (the post's lock, method 4, not run): the waiting run failed with *{error}* "
            f"in: {others}.")


def kill_lines(measures: dict) -> list[str]:
    holder = (measures.get("holder_error") or "no error").split(":")[0]
    waiter = measures["runs"][1]
    waiter_line = run_line(waiter).replace("run2: ", "waiter: ")
    return [f"holder: {holder}", waiter_line,
            f"row counts the observer ever saw: {measures['rows_seen']}; final rows: {measures['rows_final']}"]


@measured_section(110, Measured.RUN_KILLED)
def section_kill(run: RunView, ok: pd.DataFrame) -> str | None:
    rows, blocks = [], []
    for backend, group in ok.groupby("backend", sort=False):
        seen = sorted({c for m in group.measures for c in m["rows_seen"]})
        rows.append([backend, outcome_text(group.to_dict("records")), str(seen),
                     ", ".join(str(m["rows_final"]) for m in group.measures),
                     ", ".join(m["runs"][1]["outcome"] for m in group.measures)])
        if group.post_role.iloc[0] == PostRole.METHOD_4:  # the post ran its one kill point with its lock
            blocks += [f"**{backend}**, first trial (waits aside)", "",
                       *side_by_side(published.KILL_LINES, kill_lines(group.measures.iloc[0]), _mask_waits), ""]
    return "\n".join(["## A run killed after its delete, before its commit", "",
                      "Run1 takes the company, deletes its rows and keeps working; run2 arrives and waits; run1's "
                      "write session is terminated. The post tested this one kill point with the xact lock. "
                      "Reproduce: `lab run --scenario kill`.", "",
                      md_table(["backend", "outcome", "row counts the observer saw", "final rows", "run2"], rows),
                      "", *blocks])


def deadlocks_of(ok: pd.DataFrame, variant: str) -> tuple[int, int]:
    """(runs aborted by deadlock detection, trials) of a rules variant (ok: the run's ok rules trials)."""
    group = ok[ok.variant == variant]
    return sum(m["deadlocks"] for m in group.measures), len(group)


@measured_section(120, Measured.WRITE_RULES)
def section_rules(run: RunView, ok: pd.DataFrame) -> str | None:
    rows = []
    timeouts = ok[ok.variant == "lock_timeout_retry"]
    if not timeouts.empty:
        retries = [m["runs"][1]["failed_attempts"] for m in timeouts.measures]
        rebuilt = sum(m["runs_in_final"] == ["run2"] for m in timeouts.measures)
        rows.append(["3. set lock_timeout; retry the company when it fires",
                     outcome_text(timeouts.to_dict("records")),
                     f"waiter timed out {statistics.median(retries):g} times (median) and then rebuilt the "
                     f"company itself in {rebuilt} of {len(timeouts)} trials"])
    for variant, rule in (("sorted_batches", "4. lock several companies in sorted order"),
                          ("opposite_batches", "4. (the same batches locked in opposite orders)")):
        group = ok[ok.variant == variant]
        if not group.empty:
            deadlocks, n = deadlocks_of(ok, variant)
            rows.append([rule, outcome_text(group.to_dict("records")),
                         f"{deadlocks} runs aborted by deadlock detection (40P01) in {n} trials"])
    return "\n".join(["## The rules the lock inside the transaction depends on", "",
                      "Reproduce: `lab run --backend xact --scenario rules`.", "",
                      md_table(["rule (post)", "outcome", "evidence"], rows), ""])
