"""What report.html keeps of a matrix cell, to show when the cell is opened: its trials (verdict, the fault's
evidence, the checkers' findings, the history as rows) and the timeline of one of them as geometry (lanes, bars,
windows, points), which the page's script draws as SVG.

The geometry comes from lab/report/history_chart.py's bars_of, the function that also draws the PNGs of
REPORT-timelines.md, so the page's timeline and the appendix's picture show the same intervals; the browser only
places them. Times are rounded to 0.1 ms, the precision the history table prints.
"""

from __future__ import annotations

import base64
import gzip
import json
import math

from lab.checkers.ops import F, Type
from lab.checkers.outcomes import judgement_of
from lab.report.history_chart import (COMPLETION_COLOUR, FAULT_COLOUR, FENCED_COLOUR, LEASE_COLOUR, RIGHT_COLOUR,
                                      bars_of, clock_series, lanes_of)
from lab.report.matrix import Mark, MatrixCell
from lab.report.timelines import first_unsafe, has_history, history_of

DIGITS = 4  # seconds: 0.1 ms
# The page keeps its cells' data in blocks of this many cells (in the order the grids first show them), each block one
# gzipped JSON array: compressed together, cells share their words (a block is 40 % of the bytes of its cells
# compressed alone), and opening a cell inflates a block of a few hundred KB.
CELLS_PER_BLOCK = 64


def _plain(value):
    """A frame value as JSON: pandas' NaN for a field a record lacks becomes null, and so does a NaN a record's JSON
    holds anywhere in a value; tuples become lists. A value read from trials.jsonl (string keys) is written and read
    back by the json module at C speed, with NaN read as null."""
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, (dict, list, tuple)):
        return json.loads(PLAIN_JSON.encode(value), parse_constant=_constant)
    return value


def _constant(name: str) -> float | None:
    """JSON's non-numbers as _plain reads them: NaN is null, the infinities stay what they were."""
    return None if name == "NaN" else float(name)


# Encoders of the page's own: what json.dumps writes with these settings, without a wrapper a library may have put
# around json.dumps (pottery's gives every call an encoder class of its own).
SCRIPT_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
PLAIN_JSON = json.JSONEncoder()


def json_for_script(data) -> str:
    """JSON that cannot end its <script> element early: every '<' written as \\u003c; keys sorted, so stable."""
    text = SCRIPT_JSON.encode(data)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def packed(data) -> str:
    """Data as the page keeps it: its JSON, gzipped (the page's script inflates it with the browser's
    DecompressionStream when it is read) and in base64, a fraction of the JSON's bytes; mtime 0, so the same data
    gives the same text."""
    return packed_json(json_for_script(data))


def packed_json(text: str) -> str:
    """packed() of JSON already written by json_for_script."""
    return base64.b64encode(gzip.compress(text.encode(), compresslevel=9, mtime=0)).decode("ascii")


def unpacked(text: str):
    """The data a block packed() wrote (what the page's script reads), for tests and tools."""
    return json.loads(gzip.decompress(base64.b64decode(text)))


def _t(seconds: float) -> float:
    return round(float(seconds), DIGITS)


def _compact(data: dict) -> dict:
    """The keys whose value says something: a missing key reads as null in the page."""
    return {k: v for k, v in data.items() if v is not None}


def timeline(record: dict) -> dict | None:
    """A trial's timeline as the page draws it: lanes top first, the history's end, and its bars [lane, what,
    start, end, colour], fault windows [start, end], points [lane, f, time, count] and clocks {name: [[time,
    offset]]}; None for a trial without a history. A TTL band only for a lease, as the PNG draws it."""
    history = history_of(record)
    if not history:
        return None
    lease = "lease_expiry" in (record.get("capabilities") or ())
    ttl = (record.get("measures") or {}).get("ttl_s") if lease else None
    bars, windows, points = bars_of(history, ttl)
    lanes = lanes_of(history) or ["(empty)"]
    lane = {name: i for i, name in enumerate(lanes)}
    end = max([o.time for o in history] + [b.end for b in bars] + [1e-3])
    return _compact({
        "lanes": lanes, "end": _t(end),
        "bars": [[lane[b.lane], b.what, _t(b.start), _t(b.end), b.colour] for b in bars if b.lane in lane],
        "windows": [[_t(start), _t(stop)] for start, stop in windows],
        "points": [[lane[o.process], o.f.value, _t(o.time), o.get("count") if o.f is F.OBSERVE else None]
                   for o in points if o.process in lane],
        "clocks": {name: [[_t(t), _t(v)] for t, v in series] for name, series in sorted(clock_series(history).items())}
        or None})


# The colours the script draws with: the PNG's own (lab/report/history_chart.py), named once for the legend.
TIMELINE_LEGEND = [["right held (grant to release, told or end)", RIGHT_COLOUR],
                   ["lease valid (grant + TTL)", LEASE_COLOUR], ["fault window", FAULT_COLOUR],
                   ["op ok", COMPLETION_COLOUR[Type.OK]], ["op failed", COMPLETION_COLOUR[Type.FAIL]],
                   ["refused by the fence", FENCED_COLOUR], ["unknown / never completed", COMPLETION_COLOUR[Type.INFO]]]


def _judgement(record: dict) -> dict | None:
    """The checkers' verdict, each finding as [checker, valid, kind, detail, proof]."""
    judged = _plain(judgement_of(record))
    if not judged:
        return None
    findings = [[f.get("checker"), f.get("valid"), f.get("kind"), f.get("detail"), f.get("proof")]
                for f in judged.get("findings") or []]
    return _compact({**{k: v for k, v in judged.items() if k != "findings"}, "findings": findings or None})


def trial_data(record: dict, drawn: bool = False) -> dict:
    """What a panel shows of one trial: verdict, the fault's evidence, the judgement, the history as rows
    [time, process, type, f, value]; drawn: with its timeline."""
    measures = record.get("measures")
    return _compact({
        "id": record["id"], "run": _plain(record.get("run")), "status": record["status"],
        "verdict": _plain(record.get("verdict")), "reason": _plain(record.get("reason")),
        "safety": _plain(record.get("safety")), "exercised": _plain(record.get("exercised")),
        "evidence": _plain(measures.get("evidence")) if isinstance(measures, dict) else None,
        "judgement": _judgement(record), "history": history_rows(record),
        "timeline": timeline(record) if drawn else None})


TYPES, FS = {t.value: t.value for t in Type}, {f.value: f.value for f in F}


def history_rows(record: dict) -> list[list] | None:
    """The record's history as the panel's table shows it, [time, process, type, f, value] (what history_of()
    reads, Op by Op), straight from the recorded JSON; None for a record without one."""
    if not has_history(record):
        return None
    return [[_t(op["time"]), op["process"], TYPES[op["type"]], FS[op["f"]], dict(op.get("value") or {}) or None]
            for op in record["history"]]


def pictured(c: MatrixCell) -> dict | None:
    """The trial a cell's timeline shows: a failing cell's first unsafe trial (the one REPORT-timelines.md
    draws), else its first trial with a history; None for a cell without one."""
    first = first_unsafe(c.records) if c.cell.mark is Mark.FAILED else None
    return first if first is not None and has_history(first) else next((r for r in c.records if has_history(r)), None)


def cell_data(c: MatrixCell, also_drawn: frozenset[str] = frozenset()) -> dict:
    """A cell's panel: where it is, its mark and words, and its trials; the pictured trial (and any of also_drawn,
    the trials the timeline appendix shows) with its timeline."""
    shown = pictured(c)
    drawn = {shown["id"]} if shown is not None else set()
    return _compact({"backend": c.backend, "scenario": c.scenario, "variant": c.variant, "label": c.label,
                     "mark": c.cell.mark.name, "text": c.cell.text, "pictured": None if shown is None else shown["id"],
                     "trials": [trial_data(r, r["id"] in drawn or r["id"] in also_drawn) for r in c.records]})
