"""Timelines you can look at: what each run did, and when, in one failing trial.

One picture for every kill-point counterexample and for the first failing trial of every ✗ cell of
the matrix, from the trial's record alone (trials.jsonl): its history (schema 2) as intervals. A trial
that recorded no history (schema 1; no committed run has a failing one) gets no picture.
"""

from __future__ import annotations

import re

from lab.checkers import ops
from lab.checkers.outcomes import Safety, judgement_of, safety_of
from lab.measures.kinds import Measured
from lab.report.chart_cache import Drawing
from lab.report.history_chart import recorded_history_chart
from lab.report.matrix import Mark, matrix_rows
from lab.report.sections import TIMELINES, RunView, once_per_view, section


def history_of(record: dict) -> list[ops.Op] | None:
    """A schema-2 trial's history as operations (None for a schema-1 record, or a trial that recorded none)."""
    if not has_history(record):
        return None
    return ops.from_json(record["history"])


def has_history(record: dict) -> bool:
    """Whether history_of() finds a history in the record, without reading it."""
    return judgement_of(record) is not None and isinstance(record.get("history"), list) and bool(record["history"])


def slug(*parts: str) -> str:
    """Where a trial's timeline goes, beside REPORT.md: timelines/<scenario>-<backend>-<variant>.png."""
    return "timelines/" + "-".join(re.sub(r"[^a-z0-9]+", "_", p.lower()).strip("_") for p in parts) + ".png"


def first_unsafe(records: list[dict]) -> dict | None:
    """The trial a failing cell is pictured by: its first unsafe one."""
    return next((r for r in records if r["status"] == "ok" and safety_of(r) is Safety.UNSAFE), None)


def history_picture(record: dict) -> Drawing | None:
    """The drawing of a schema-2 trial's history as intervals (a TTL band only for a lease), from the history as
    recorded (what its cached PNG is keyed by), or None."""
    if not has_history(record):
        return None
    lease = "lease_expiry" in (record.get("capabilities") or ())
    ttl = (record.get("measures") or {}).get("ttl_s") if lease else None
    return Drawing(recorded_history_chart, (record["history"], record["id"], ttl))


@once_per_view
def failing_trials(run: RunView) -> list[tuple[str, dict]]:
    """(what it explains, record) for the first unsafe trial of every ✗ matrix cell, then every kill-point
    counterexample, in the report's order."""
    frame = run.frame
    searches = set(frame[frame.measured == Measured.KILL_POINT_SEARCH].scenario)  # their counterexamples follow
    found = []
    for _, cells in matrix_rows(run):
        for c in cells:
            if c.cell.mark is Mark.FAILED and c.scenario not in searches:
                first = first_unsafe(c.records)
                assert first is not None  # a ✗ cell is one with an unsafe trial: judge() marks it so
                found.append((f"`{c.backend}` under *{c.label}*: {first['verdict']}", first))
    for record in frame[(frame.measured == Measured.KILL_POINT_SEARCH) & (frame.status == "ok")].to_dict("records"):
        if (record["measures"] or {}).get("minimal"):
            found.append((f"`{record['backend']}`: kill-point counterexample, {record['verdict']}", record))
    return found


@section(190, file=TIMELINES)
def section_timelines(run: RunView) -> str | None:
    charts = run.charts
    shown, without = [], []
    for caption, record in failing_trials(run):
        name = slug(record["scenario"], record["backend"], record["variant"])
        draw = history_picture(record)
        if not draw:  # schema 1: no history recorded
            without.append(caption)
            continue
        if charts is not None:
            charts[name] = draw
        shown.append(f"{caption} (`{record['id']}`)\n\n![{record['id']}]({name})\n")
    if not shown and not without:
        return None
    return "\n".join([
        "## Timelines of the failures", "",
        "For the first failing trial of every ✗ cell of the matrix, and for every kill-point counterexample: one "
        "lane per run, on the trial's own clock (seconds from the holder's grant, or from the start of the "
        "history). "
        + ("A trial with a recorded history (schema 2) is drawn as Jepsen draws one: each operation a bar from "
           "its invoke to its completion (blue ok, red failed, orange refused by the fence, grey unknown or never "
           "completed), a run-level right a pale green band from its grant to its release (or the moment its "
           "holder heard it was gone), a lease's TTL a dark green line beside it, the fault's window shaded red, "
           "the holder told ★, the observer's counts as numbers. " if shown else ""), "",
        *shown,
        *([f"No times recorded for: {'; '.join(without)}.", ""] if without else [])])
