"""Timelines you can look at: what each run did, and when, in one failing trial.

One picture for every kill-point counterexample and for the first failing trial of every ✗ cell of
the matrix, from the trial's record alone (trials.jsonl): its history (schema 2) as intervals, or for an
older trial without one the times its scenario measured (the fault's, the holder's grant and write, the
contender's grant and write, the probes) as points. A trial shape with no times recorded gets no picture.
"""

from __future__ import annotations

import re

from lab.checkers import ops
from lab.checkers.outcomes import Safety, judgement_of, safety_of
from lab.measures.kinds import Measured
from lab.report.history_chart import history_chart
from lab.report.matrix import Mark, matrix_rows
from lab.report.sections import TIMELINES, RunView, section

WRITE_EVENT = {"committed": "write_committed", "rejected": "write_rejected", "failed": "write_failed",
               "indeterminate": "write_indeterminate"}


def events_of(record: dict) -> list[dict] | None:
    """A schema-1 trial (one without a history) as points {t, run, event, label} on its own clock, read off the
    times its scenario measured; None for a shape without times. (A kill-point counterexample always has a
    history, drawn by history_picture.)"""
    m = record.get("measures") or {}
    if "fault_at" in m and "holder" in m and "contender" in m:
        return _lease_shape(m)
    if "runs" in m and all("started" in r for r in m["runs"]):
        return _two_runs(m)
    if "probes" in m:
        return _probes(m)
    if "got_at" in m and "killed_at" in m:
        return [{"t": 0.0, "run": "holder", "event": "acquire_granted"},
                {"t": m["killed_at"], "run": "fault", "event": "fault_fired", "label": "session killed"},
                {"t": m["got_at"], "run": "poller", "event": "acquire_granted"}]
    return None


def history_of(record: dict) -> list[ops.Op] | None:
    """A schema-2 trial's history as operations (None for a schema-1 record, or a trial that recorded none)."""
    if judgement_of(record) is None or not isinstance(record.get("history"), list) or not record["history"]:
        return None
    return ops.from_json(record["history"])


def _lease_shape(m: dict) -> list[dict]:
    """The holder/contender trials: times are from the holder's grant (or its first event)."""
    holder, contender = m["holder"], m["contender"]
    events = [{"t": m["fault_at"], "run": "fault", "event": "fault_fired", "label": m.get("fault")},
              {"t": m["healed_at"], "run": "fault", "event": "fault_healed"}]
    if holder.get("granted", True):
        events.append({"t": 0.0, "run": "holder", "event": "acquire_granted", "label": _token(holder)})
    if holder.get("noticed_loss_at") is not None:
        events.append({"t": holder["noticed_loss_at"], "run": "holder", "event": "loss_noticed"})
    for signal in holder.get("signals") or []:
        events.append({"t": signal["at"], "run": "holder", "event": "told", "label": signal.get("via")})
    if holder.get("write_at") is not None and holder.get("write") in WRITE_EVENT:
        events.append({"t": holder["write_at"], "run": "holder", "event": WRITE_EVENT[holder["write"]]})
    if contender.get("granted_at") is not None:
        events.append({"t": contender["granted_at"], "run": "contender", "event": "acquire_granted",
                       "label": _token(contender)})
    if contender.get("in_at") is not None and contender.get("write") in WRITE_EVENT:
        events.append({"t": contender["in_at"], "run": "contender", "event": WRITE_EVENT[contender["write"]]})
    return events


def _token(side: dict) -> str | None:
    return None if side.get("token") is None else f"token {side['token']}"


def _two_runs(m: dict) -> list[dict]:
    """Two runs of the job (overlap, kill, rules): when each began and how its write ended."""
    events = []
    for run in m["runs"]:
        events.append({"t": run["started"], "run": run["run"], "event": "acquire_requested"})
        outcome = "acquire_refused" if run["outcome"] == "refused" else WRITE_EVENT.get(run["outcome"])
        if outcome:
            events.append({"t": run["ended"], "run": run["run"], "event": outcome})
    if m.get("killed_at") is not None:
        events.append({"t": m["killed_at"], "run": "fault", "event": "fault_fired", "label": "session killed"})
    return events


def _probes(m: dict) -> list[dict]:
    """The cases scenario: the holder's grant, the guard's timeout, a second session's probes."""
    events = [{"t": 0.0, "run": "holder", "event": "acquire_granted"}]
    if m.get("timeout_s") is not None:
        events.append({"t": m["timeout_s"], "run": "fault", "event": "fault_fired", "label": m.get("setting")})
    for probe in m["probes"]:
        events.append({"t": probe["at"], "run": "prober",
                       "event": "acquire_granted" if probe["got"] else "acquire_refused"})
    return events


def slug(*parts: str) -> str:
    """Where a trial's timeline goes, beside REPORT.md: timelines/<scenario>-<backend>-<variant>.png."""
    return "timelines/" + "-".join(re.sub(r"[^a-z0-9]+", "_", p.lower()).strip("_") for p in parts) + ".png"


def first_unsafe(records: list[dict]) -> dict | None:
    """The trial a failing cell is pictured by: its first unsafe one."""
    return next((r for r in records if r["status"] == "ok" and safety_of(r) is Safety.UNSAFE), None)


def history_picture(record: dict):
    """draw(path) for a schema-2 trial's history as intervals (a TTL band only for a lease), or None."""
    history = history_of(record)
    if not history:
        return None
    lease = "lease_expiry" in (record.get("capabilities") or ())
    ttl = (record.get("measures") or {}).get("ttl_s") if lease else None
    return lambda path, h=history, title=record["id"], ttl=ttl: history_chart(h, title, path, ttl)


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
    frame, charts = run.frame, run.charts
    from lab.report.charts import timeline_chart

    shown, without = [], []
    histories = points = 0
    for caption, record in failing_trials(run):
        name = slug(record["scenario"], record["backend"], record["variant"])
        draw = history_picture(record)
        if draw:  # schema 2: the trial's own history, drawn as intervals
            if charts is not None:
                charts[name] = draw
            shown.append(f"{caption} (`{record['id']}`)\n\n![{record['id']}]({name})\n")
            histories += 1
            continue
        events = events_of(record)
        if not events:
            without.append(caption)
            continue
        if charts is not None:
            charts[name] = lambda path, events=events, title=record["id"]: timeline_chart(events, title, path)
        shown.append(f"{caption} (`{record['id']}`)\n\n![{record['id']}]({name})\n")
        points += 1
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
           "the holder told ★, the observer's counts as numbers. " if histories else "")
        + ("Older trials are points: asked, granted ▲, refused ×, write committed ■ (blue), refused by the fence "
           "■ (orange), rolled back ■ (red), commit unknown ■ (grey), the fault ▼ red and healed ▼ green, the "
           "holder told ★ or noticing its loss ◆, the observer's counts." if points else ""), "",
        *shown,
        *([f"No times recorded for: {'; '.join(without)}.", ""] if without else [])])
