"""How `lab report` reads a run: each run's trials.jsonl once, and of the previous reference only what its cells'
marks are judged on (lab/report/__init__.py judged_fields), which judges them as the whole records do."""

from __future__ import annotations

import re
from pathlib import Path

from lab.report import judged_fields, write_report
from lab.report.matrix import matrix_rows
from lab.report.sections import RunView
from lab.records.results import RunFolder
from tests.fast.planted import saved_run, trial

ROOT = Path(__file__).resolve().parents[2]


def test_each_run_and_the_previous_reference_are_read_once(tmp_path, monkeypatch):
    meta = {"backend_order": ["none", "session"], "scenario_order": ["pause"]}
    trials = [trial("pause", "sigstop", b, kind, index=i) for b, kind in (("none", "stale write accepted"),
                                                                          ("session", "held")) for i in range(2)]
    first, second = saved_run(tmp_path / "a", meta, trials), saved_run(tmp_path / "b", meta, trials[:1])
    previous = saved_run(tmp_path / "p", meta, trials)
    read: list[str] = []
    records = RunFolder.records

    def counted(folder):
        read.append(folder.run_id)
        return records(folder)

    monkeypatch.setattr(RunFolder, "records", counted)
    write_report([first, second], tmp_path / "out" / "REPORT.md", html=True, previous=previous)
    assert sorted(read) == ["a", "b", "p"]


def test_the_previous_references_cells_are_judged_from_the_fields_kept_as_from_whole_records():
    """The committed reference's previous run, its every cell judged from whole records and from judged_fields:
    the same marks and words."""
    report = (ROOT / "REPORT.md").read_text()
    previous = re.search(r"^\| previous reference \| (.+?) \|$", report, re.M)
    assert previous, "the committed REPORT.md names its previous reference"
    folder = RunFolder(ROOT / "results" / previous.group(1))
    whole = folder.trials()
    kept = [judged_fields(r) for r in whole]
    assert sum(len(str(r)) for r in kept) < sum(len(str(r)) for r in whole) / 2  # most of the weight left out

    def cells(records):
        return [(c.backend, c.label, c.cell) for _, row in matrix_rows(RunView.of(records, folder.meta())) for c in row]

    assert cells(kept) == cells(whole)
