"""`lab export RUN --format jepsen DIR`: the files read back as Jepsen operations, one per judged trial."""

from __future__ import annotations

import re
import subprocess
import sys

from lab.checkers import ops
from lab.checkers.judge import judge
from lab.records.results import RunFolder
from lab.runner import records
from scenarios.base import TrialSpec
from tests.fast.test_one_verdict_per_behaviour import superseded_pause

# One EDN map a line: {:process 0, :type :invoke, :f :acquire, :value nil, :time 0, :process-name "holder"}
LINE = re.compile(r'\{:process (?P<process>\d+|:nemesis), :type :(?P<type>\w+), :f :(?P<f>\w+), '
                  r':value (?P<value>nil|\{.*\}), :time (?P<time>\d+), :process-name "(?P<name>[^"]+)"\}')


def judged_record(history, index=0):
    verdict = judge(history, {1: {"rows": 250, "runs": ["holder"]}}, 250)
    return records.ok(TrialSpec("pause", "redis", "sigstop", index), {},
                      {"verdict": verdict.kind.value, "judgement": verdict.to_json(), "history": ops.to_json(history),
                       "schema": ops.SCHEMA, "safety": verdict.safety.value, "exercised": verdict.exercised})


def test_export_writes_each_history_as_jepsen_operations(tmp_path):
    folder = RunFolder.create(tmp_path / "results", {"command": "test"})
    folder.append(judged_record(superseded_pause()))
    folder.append({"id": "perf/xact/x/0", "scenario": "perf", "backend": "xact", "variant": "x", "index": 0,
                   "status": "ok", "verdict": "measured"})  # a trial with no history: nothing to export
    out = tmp_path / "edn"
    done = subprocess.run([sys.executable, "-m", "lab.cli", "export", folder.run_id, str(out),
                           "--results", str(tmp_path / "results")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    (path,) = out.iterdir()
    assert path.name == "pause__redis__sigstop__0.edn"
    text = path.read_text()
    assert text.startswith("[") and text.rstrip().endswith("]")
    rows = [LINE.search(line).groupdict() for line in text.splitlines()]
    assert all(rows), text
    # Every completion of a process follows an invoke of the same f; the fault is the nemesis's, as info.
    open_ = set()
    for row in rows:
        if row["process"] == ":nemesis":
            assert row["type"] == "info" and row["f"] in ("fault", "heal")
            continue
        key = (row["process"], row["f"])
        if row["type"] == "invoke":
            open_.add(key)
        elif row["f"] != "commit":
            assert key in open_, row
            open_.discard(key)
    names = {row["process"]: row["name"] for row in rows if row["process"] != ":nemesis"}
    assert names == {"0": "holder", "1": "contender"}
    acquires = [(r["name"], r["type"]) for r in rows if r["f"] == "acquire"]
    assert ("holder", "ok") in acquires and ("contender", "ok") in acquires


def test_a_run_without_histories_is_refused_in_one_line(tmp_path):
    folder = RunFolder.create(tmp_path / "results", {"command": "test"})
    folder.append({"id": "cases/session/a/0", "scenario": "cases", "backend": "session", "variant": "a",
                   "index": 0, "status": "ok", "verdict": "lost"})  # schema 1: no history
    done = subprocess.run([sys.executable, "-m", "lab.cli", "export", folder.run_id, str(tmp_path / "edn"),
                           "--results", str(tmp_path / "results")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no trial histories" in done.stderr


def test_a_run_of_a_schema_this_lab_cannot_read_is_refused_in_one_line(tmp_path):
    folder = RunFolder.create(tmp_path / "results", {"command": "lab run", "lab_commit": "abc1234"})
    folder.append({"id": "cases/session/a/0", "scenario": "cases", "backend": "session", "variant": "a",
                   "index": 0, "status": "ok", "verdict": "lost", "schema": 99})
    done = subprocess.run([sys.executable, "-m", "lab.cli", "report", folder.run_id, "--results",
                           str(tmp_path / "results"), "--output", str(tmp_path / "R.md")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "schema 99" in done.stderr and "cannot render" in done.stderr and not (tmp_path / "R.md").exists()
