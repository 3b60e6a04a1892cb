"""The committed REPORT.md: reproduced byte for byte from the committed run, every figure traceable to it.

The counts are recomputed here straight from trials.jsonl, without the report's code, so a report
that drifted from its results (or was edited by hand) fails.
"""

import functools
import re
from collections import Counter
from pathlib import Path

import pytest

import scenarios
from lab.report import render_runs
from lab.records.results import RunFolder

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "REPORT.md"


def reference():
    if not REPORT.exists():
        pytest.skip("no committed REPORT.md yet")
    run_ids = re.search(r"^\| run \| (.+?) \|$", REPORT.read_text(), re.M).group(1).split(" + ")
    folders = [RunFolder(ROOT / "results" / run_id) for run_id in run_ids]
    trials = {}
    for folder in folders:
        for record in folder.trials():
            trials[record["id"]] = record  # the last record of a trial counts, as in the report
    return folders, list(trials.values())


def table(text: str, heading: str) -> list[list[str]]:
    """The first Markdown table after a heading, as rows of cells (header and rule dropped)."""
    section = text.split(heading, 1)[1]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    rows, started = [], False
    for line in section.splitlines():
        if line.startswith("|"):
            started = True
            rows.append([c.strip() for c in line.strip("|").split(" | ")])
        elif started:
            break
    assert lines, heading
    return rows[2:]


def previous_reference() -> RunFolder | None:
    """The previous reference the committed page was compared with (its Provenance names it), or None."""
    found = re.search(r"^\| previous reference \| (.+?) \|$", REPORT.read_text(), re.M)
    return RunFolder(ROOT / "results" / found.group(1)) if found else None


@functools.cache
def rendered_reference() -> str:
    """The committed runs rendered whole, once per test session: this module and the scorecard's read it."""
    folders, _ = reference()
    return render_runs(folders, previous=previous_reference())


def test_report_is_reproduced_byte_for_byte():
    assert rendered_reference() == REPORT.read_text()


def matrix_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every table of the matrix appendix (REPORT-matrix.md: a section per family of faults, a table per family of
    locks), as (header, rows)."""
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith("| backend |"):
            current = ([c.strip() for c in line.strip(" |").split(" | ")][1:], [])
            tables.append(current)
        elif line.startswith("|---"):
            continue
        elif line.startswith("|") and current is not None:
            current[1].append([c.strip() for c in line.strip("|").split(" | ")])
        else:
            current = None
    # The library table of a run that recorded its libraries' languages has a library column after the
    # backend (lab/report/libraries.py): not a fault's, so left out here.
    return [(header[1:], [[row[0], *row[2:]] for row in rows]) if header[:1] == ["library"] else (header, rows)
            for header, rows in tables]


def test_every_matrix_count_comes_from_the_trials():
    from lab.decision.cells import UNSTABLE

    folder, trials = reference()
    text = (ROOT / "REPORT-matrix.md").read_text()
    from lab.report.declared import matrix_columns

    keys = {c.label: (scenario, c.variant) for scenario, c in matrix_columns(folder[0].meta())}
    checked, rows_seen = 0, []
    tables = matrix_tables(text)
    assert len(tables) >= 10  # a table per family of locks in each family of faults
    assert max(len(header) + 1 for header, _ in tables) <= 20  # no table wider than 20 columns
    for header, rows in tables:
        for row in rows:
            backend = row[0]
            rows_seen.append(backend)
            for label, cell in zip(header, row[1:]):
                scenario, variant = keys[label]
                records = [t for t in trials if t["scenario"] == scenario and t["backend"] == backend
                           and t["variant"] == variant]
                verdicts = Counter(t["verdict"] for t in records if t["status"] == "ok")
                total = sum(t["status"] != "skipped" for t in records)
                if not verdicts:
                    errors = sum(t["status"] == "error" for t in records)
                    now = cell.split(f" {UNSTABLE} was ")[0]  # the mark, without what it was in the previous reference
                    assert now in ("n/a", "not run", "does not run", f"error {errors}/{total}"), (backend, label, cell)
                    continue
                for verdict, n in verdicts.items():
                    assert f"{verdict} {n}/{total}" in cell, (backend, label, cell)
                    checked += 1
                errors = sum(t["status"] == "error" for t in records)
                assert (f"error {errors}/{total}" in cell) == bool(errors), (backend, label, cell)
    assert checked > 50
    # Every backend is a row of some table, or named under one as left out (n/a or not run in all its columns).
    left_out = {name for line in re.findall(r"^Left out, n/a or not run under each fault above: (.+)\.$", text, re.M)
                for name in line.split(", ")}
    assert set(rows_seen) | left_out == {t["backend"] for t in trials
                                         if t["scenario"] in {s for s, _ in keys.values()}}


def test_every_timing_row_comes_from_the_trials():
    _, trials = reference()
    labels = {"default": "session", "AUTOCOMMIT": "session_autocommit"}
    for row in table(REPORT.read_text(), "## Timing runs"):
        trigger, who = row[0].split("/", 1)
        backend = labels.get(who, who)
        firsts = [t["measures"]["first_got_at"] for t in trials
                  if t["scenario"] == "timing" and t["backend"] == backend and t["variant"] == trigger]
        got = sorted(f for f in firsts if f is not None)
        assert row[1].startswith(f"{len(got)}/{len(firsts)} trials overlapped")
        if got:
            assert f"min {got[0]:.2f}s, max {got[-1]:.2f}s" in row[1]


# Scenarios registered since the committed reference was made, which the next reference (one command at one commit)
# runs: merging a run of them into this one would make the page "Not a reference". Each must still be missing from
# the reference, so the entry goes when the reference covers it.
NEXT_REFERENCE: set[str] = set()


def test_the_committed_run_describes_itself():
    """The first run is a full run of the default profile; the runs merged into it may add scenarios (a
    later one, a driver axis, the full profile's two-hour network drop), and together they cover every
    scenario registered today but those the next reference is to run."""
    folders, trials = reference()
    meta = folders[0].meta()
    assert meta["profile"] == "default" and "--scenario all" in meta["command"] and meta["git_commit"]
    for later in folders[1:]:  # a full-profile run adds only what that profile alone runs: netdrop's OS defaults
        later_meta = later.meta()
        assert later_meta["profile"] == "default" or (later_meta["profile"] == "full"
                                                      and later_meta["scenarios"] == ["netdrop"])
    covered = {name for f in folders for name in f.meta()["scenarios"]}
    assert set(scenarios.names()) - NEXT_REFERENCE <= covered and not NEXT_REFERENCE & covered
    assert {t["scenario"] for t in trials} >= {"cases", "calibrate", "timing", "pause", "killpoints", "perf"}


def _ok(trials, scenario, **match):
    return [t for t in trials if t["scenario"] == scenario and t["status"] == "ok"
            and all(t[k] == v for k, v in match.items())]


def test_overlap_and_kill_rows_come_from_the_trials():
    _, trials = reference()
    text = REPORT.read_text()
    for row in table(text, "## Two rebuilds of one company at once"):
        backend, isolation = row[0], row[1]
        variant = "repeatable_read" if isolation == "REPEATABLE READ" else "two_runs"
        finals = [str(t["measures"]["rows_final"]) for t in _ok(trials, "overlap", backend=backend, variant=variant)]
        assert row[2].startswith(", ".join(finals)), row
    for row in table(text, "## A run killed after its delete"):
        finals = [str(t["measures"]["rows_final"]) for t in _ok(trials, "kill", backend=row[0])]
        seen = sorted({c for t in _ok(trials, "kill", backend=row[0]) for c in t["measures"]["rows_seen"]})
        assert row[3] == ", ".join(finals) and row[2] == str(seen), row


def test_conflict_counts_and_cost_medians_come_from_the_trials():
    import statistics

    _, trials = reference()
    text = REPORT.read_text()
    designs = {"no index": "no_index", "index, adjacent ids": "adjacent_ids", "index, spread-out ids": "spread_ids"}
    for row in table(text, "## SERIALIZABLE without a lock"):
        counts = [t["measures"]["failed"] for t in _ok(trials, "conflicts", variant=designs[row[0]])]
        assert row[2] == ", ".join(f"{c} of 8" for c in counts), row
    configs = {t["measures"]["config"]: t["variant"] for t in _ok(trials, "perf")}
    for row in table(text, "## What the lock costs per company"):
        seconds = [t["measures"]["seconds"] for t in _ok(trials, "perf", variant=configs[row[0]])]
        assert row[3].startswith(f"{statistics.median(seconds):.2f} s ({min(seconds):.2f}-{max(seconds):.2f}"), row


def test_calibration_lines_and_kill_point_verdicts_come_from_the_trials():
    _, trials = reference()
    text = REPORT.read_text()
    section = text.split("## Calibration", 1)[1].split("\n## ", 1)[0]
    for t in _ok(trials, "calibrate"):  # the measured kill, not the scheduled one, and the gap after it
        m = t["measures"]
        if t["backend"] not in ("session", "session_commit", "session_autocommit"):
            continue  # the section shows the post's three session locks
        if t["backend"] == "session_autocommit":
            assert f"| {m['killed_at']:.3f}s, {m['got_at']:.3f}s ({m['gap']:.3f}s) |" in section
        else:
            # Schema 2 records how soon the poller saw the lock free as a figure; schema 1 as its verdict.
            detected = (t.get("judgement") or {}).get("figures", {}).get("detection", t["verdict"])
            assert (f"killed at {m['killed_at']:.3f}s, second session got the lock at {m['got_at']:.3f}s "
                    f"(gap {m['gap']:.3f}s: {detected})") in section
    for row in table(text, "## Kill points searched by hypothesis"):
        (trial,) = _ok(trials, "killpoints", backend=row[0])
        m = trial["measures"]
        if m["minimal"] is None and m.get("struck") is None:
            assert row[1] == f"{m['tried']} schedules tried, none failed", row
        elif m["minimal"] is None:
            assert row[1].startswith(f"{m['struck']} of {m['tried']} schedules struck") or not m["struck"], row
        else:
            assert f"after {m['tried']} schedules: {m['described']}" in row[1], row


def test_every_told_cell_comes_from_the_trials():
    """Recount the 'what the holder was told' table: trials where another run got the lock, first signal's channel."""
    _, trials = reference()
    words = {"exception": "an exception", "false": "a False return", "log": "a log line", "refused": "a refused write"}
    faults = told_columns()
    rows = table(REPORT.read_text(), "## What the holder was told when its lock was lost")
    assert len(rows) >= 10 and faults[0] == "pause" and {"cut", "restart"} <= set(faults)
    for row in rows:
        for scenario, cell in zip(faults, row[1:1 + len(faults)]):
            recorded = [t["measures"] for t in _ok(trials, scenario, backend=row[0])
                        if "signals" in t["measures"]["holder"]]
            lost = [m for m in recorded if m["holder"].get("granted", True)
                    and m["contender"].get("granted_at") is not None]
            if not recorded and cell in ("not run", "n/a"):  # no such trial, or the fault does not apply
                continue
            if not lost:
                assert cell == f"not lost {len(recorded)}/{len(recorded)}", (row[0], scenario, cell)
                continue
            firsts = Counter()
            for m in lost:
                after = [s for s in m["holder"]["signals"] if s["at"] >= m["fault_at"]]
                firsts[(after[0]["how"], after[0]["via"]) if after else None] += 1
            kind, n = sorted(firsts.items(), key=lambda kv: (-kv[1], str(kv[0])))[0]  # most common; ties by name
            if kind is None:
                assert cell.startswith(f"nothing {n}/{len(lost)}"), (row[0], scenario, cell)
            else:
                assert cell.startswith(f"{words[kind[0]]} from {kind[1]}"), (row[0], scenario, cell)
                assert f"; {n}/{len(lost)}, " in cell, (row[0], scenario, cell)
            for other, count in firsts.items():  # every rarer first signal is named with its count
                if other != kind:
                    named = "nothing" if other is None else f"{words[other[0]]} from {other[1]}"
                    assert f"; else {named} {count}/{len(lost)}" in cell, (row[0], scenario, cell)


# The told table's column headings -> the scenario each counts (read from REPORT.md, not from the report's code).
def told_columns() -> list[str]:
    section = REPORT.read_text().split("## What the holder was told when its lock was lost", 1)[1]
    header = next(line for line in section.splitlines() if line.startswith("| backend |"))
    from lab.report.declared import lease_faults

    first = re.search(r"^\| run \| (.+?) \|$", REPORT.read_text(), re.M).group(1).split(" + ")[0]
    by_title = {f.title: f.scenario for f in lease_faults(RunFolder(ROOT / "results" / first).meta())}  # as declared
    return [by_title[h.strip()] for h in header.strip("|").split("|")[1:-1]]


def test_the_told_summary_line_is_recounted():
    _, trials = reference()
    faults = told_columns()
    stale = [t["measures"] for t in trials if t["scenario"] in faults and t["status"] == "ok"
             and "signals" in t["measures"]["holder"] and t["measures"]["point"] == "before_write"
             and t["measures"]["contender"].get("granted_at") is not None and stale_write_accepted(t)]
    before = sum(any(s["at"] >= m["fault_at"] and s["at"] < m["holder"]["write_at"] for s in m["holder"]["signals"])
                 for m in stale)
    heard = sum(any(s["at"] >= m["fault_at"] for s in m["holder"]["signals"]) for m in stale)
    assert (f"In the {len(stale)} trials above whose stale write was accepted, the holder heard something before "
            f"that write committed in {before}, only afterwards in {heard - before}, and nothing at all in "
            f"{len(stale) - heard}") in REPORT.read_text()


def stale_write_accepted(t: dict) -> bool:
    """The checkers' kind (schema 2), or schema 1's own measures."""
    if t.get("judgement"):
        return t["judgement"]["kind"] == "stale write accepted"
    return t["measures"]["lost"] and t["measures"]["holder"]["write"] == "committed"


def test_every_replay_command_names_the_run_that_holds_its_schedule():
    folders, _ = reference()
    commands = re.findall(r"`lab replay (\S+) (\S+)`", REPORT.read_text())
    assert len(commands) >= 10
    by_id = {f.run_id: f for f in folders}
    searched: dict[str, set[str]] = {}  # run -> its finished kill-point searches' ids, each run read once
    for run_id, backend in commands:
        assert run_id in by_id, run_id  # one run, never the merged "a + b" name
        if run_id not in searched:
            searched[run_id] = {t["id"] for t in by_id[run_id].trials()
                                if t["scenario"] == "killpoints" and t["status"] == "ok"}
        assert f"killpoints/{backend}/search/0" in searched[run_id], (run_id, backend)
