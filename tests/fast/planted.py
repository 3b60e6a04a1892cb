"""Runs planted for the report's tests: a run folder written from a meta.json and trial records, as a run writes
them, and a judged trial record of one verdict kind."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from lab.records.results import RunFolder

KIND_SAFETY = {"acknowledged write lost": "unsafe", "stale write accepted": "unsafe", "rolled back": "safe",
               "stale write rejected": "safe", "held": "safe", "intact": "safe"}


def saved_run(path: Path, meta: dict, trials: Iterable[dict]) -> RunFolder:
    """A run folder at path (made here) holding meta as its meta.json and trials as its trials.jsonl."""
    folder = RunFolder(path)
    folder.path.mkdir(parents=True)
    folder.write_meta(meta)
    for record in trials:
        folder.append(record)
    return folder


def trial(scenario, variant, backend, kind, *, index=0, exercised=True, lock="true", findings=()) -> dict:
    """A finished trial judged `kind` (a key of KIND_SAFETY), with the checkers' findings as (checker, kind)."""
    judgement = {"kind": kind, "lock": lock, "safety": KIND_SAFETY[kind], "exercised": exercised,
                 "findings": [{"checker": c, "valid": "false", "kind": k} for c, k in findings]}
    return {"id": f"{scenario}/{backend}/{variant}/{index}", "scenario": scenario, "backend": backend,
            "variant": variant, "index": index, "status": "ok", "verdict": kind, "safety": KIND_SAFETY[kind],
            "exercised": exercised, "schema": 2, "judgement": judgement, "measures": {}}
