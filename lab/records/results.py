"""A run's folder: meta.json describing it, trials.jsonl with one line per finished trial.

A trial is appended (and fsynced) the moment it finishes, so a crash or Ctrl-C
loses at most the trials in flight. A torn last line is ignored on reading.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
import time
from pathlib import Path

from lab.errors import LabError

META = "meta.json"
TRIALS = "trials.jsonl"


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


class RunFolder:
    """results/<run-id>/: read and append, never rewrite a finished trial."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    @property
    def run_id(self) -> str:
        return self.path.name

    @classmethod
    def create(cls, root: Path, meta: dict) -> "RunFolder":
        path = root / new_run_id()
        path.mkdir(parents=True)
        folder = cls(path)
        folder.write_meta(meta)
        return folder

    @classmethod
    def open(cls, root: Path, run_id: str) -> "RunFolder":
        path = Path(run_id) if Path(run_id).is_dir() else root / run_id
        if not (path / META).is_file():
            raise LabError(f"no run {run_id!r} under {root} (expected {path / META})")
        return cls(path)

    @classmethod
    def latest(cls, root: Path) -> "RunFolder":
        runs = sorted(p for p in root.glob("*") if (p / META).is_file())
        if not runs:
            raise LabError(f"no runs under {root}; run 'lab run' first")
        return cls(runs[-1])

    def meta(self) -> dict:
        return json.loads((self.path / META).read_text())

    def write_meta(self, meta: dict) -> None:
        tmp = self.path / (META + ".tmp")
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.path / META)

    def append(self, record: Mapping[str, object]) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._lock, open(self.path / TRIALS, "a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def append_all(self, records: Sequence[Mapping[str, object]]) -> None:
        """Several records in one write (the subjects of one shared fault event): a crash keeps all of them or, at
        worst, those before a torn last line, which count as not done."""
        lines = "".join(json.dumps(record, sort_keys=True) + "\n" for record in records)
        with self._lock, open(self.path / TRIALS, "a") as f:
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())

    def trials(self) -> list[dict]:
        return list(self.records())

    def records(self) -> Iterator[dict]:
        """The trial records one at a time, in the order they were written: a reader that keeps only part of each
        (the previous reference a report compares with) never holds the whole file's records at once."""
        path = self.path / TRIALS
        if not path.exists():
            return
        with open(path) as f:
            for line in f:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line torn by a crash mid-write: that trial counts as not done
                _share_words(record)
                yield record


def _share_words(record: dict) -> None:
    """The process, type and f of every operation of a record's history as one shared string each, not one copy per
    operation: a reference run's histories hold 150,000 operations."""
    history = record.get("history")
    if isinstance(history, list):
        for op in history:
            if isinstance(op, dict):
                for key in ("process", "type", "f"):
                    word = op.get(key)
                    if isinstance(word, str):
                        op[key] = sys.intern(word)
