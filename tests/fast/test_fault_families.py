"""Families of faults: every registered column declares one and meta.json keeps it; the summary matrix leads each
family's cell with its worst mark (a planted ✗ in one fault makes the family's cell ✗); the matrix appendix has no
table wider than 20 columns and no column (or row) that says nothing, even for a run that recorded no family."""

from __future__ import annotations

import pytest

import scenarios
from lab.declarations.columns import Column, FaultColumns, FaultFamily, from_meta, to_meta
from lab.report import declared
from lab.report.fault_groups import summary_of, summary_tables
from lab.report.fault_summary import section_fault_summary
from lab.decision.cells import SEVERITY, Mark
from lab.report.matrix_split import section_matrix
from lab.report.matrix_split import COLUMN_LIMIT, split_tables
from lab.report.sections import RunView


# --- the declarations ----------------------------------------------------------------------------------------

def test_every_registered_scenarios_columns_declare_a_family():
    undeclared = [(f.scenario, c.variant) for f in scenarios.fault_columns() for c in f.columns
                  if c.family is FaultFamily.OTHER]
    assert undeclared == []
    assert len({c.family for f in scenarios.fault_columns() for c in f.columns}) <= 13  # the summary's 14 columns


def test_a_family_travels_through_meta_json_and_an_unknown_or_missing_one_reads_as_other():
    fault = FaultColumns("pause", "paused", (Column("sigstop", "paused", 7, "legend", FaultFamily.PAUSES),))
    meta = to_meta([fault])
    assert meta["faults"]["pause"]["columns"][0]["family"] == "pauses"  # a plain string in meta.json
    assert from_meta(meta) == [fault]
    meta["faults"]["pause"]["columns"][0]["family"] = "a family of a newer lab"
    assert from_meta(meta)[0].columns[0].family is FaultFamily.OTHER
    del meta["faults"]["pause"]["columns"][0]["family"]
    assert from_meta(meta)[0].columns[0].family is FaultFamily.OTHER


@pytest.fixture
def nothing_installed():
    """The report as a checkout that declares no scenario renders: only what the run recorded."""
    declared.install([])
    yield
    declared.install(scenarios.fault_columns())


def _without_families(meta: dict) -> dict:
    for fault in meta["faults"].values():
        for column in fault["columns"]:
            column.pop("family", None)
    return meta


def test_a_run_recorded_before_families_takes_the_labs_own_declaration_else_other(nothing_installed):
    """As control_of does for controls: the lab's declaration of the same scenario and variant, never a guess
    from a name; a column the lab does not declare goes to OTHER. A family the run recorded wins."""
    old = _without_families(to_meta(scenarios.fault_columns()))
    assert {c.family for f in declared.faults_of(old) for c in f.columns} == {FaultFamily.OTHER}
    declared.install(scenarios.fault_columns())
    by_variant = {(f.scenario, c.variant): c.family for f in declared.faults_of(old) for c in f.columns}
    assert by_variant[("pause", "sigstop")] is FaultFamily.PAUSES
    assert by_variant[("patroni", "crash")] is FaultFamily.MANAGED_FAILOVER
    recorded = to_meta([FaultColumns("pause", "paused", (Column("sigstop", "paused", 7, "legend",
                                                               FaultFamily.NETWORK),))])
    (pause,) = [f for f in declared.faults_of(recorded) if f.scenario == "pause"]
    assert pause.columns[0].family is FaultFamily.NETWORK


# --- the summary's cells -------------------------------------------------------------------------------------

def test_every_mark_has_a_place_in_the_severity_order():
    assert sorted(SEVERITY, key=lambda m: m.name) == sorted(Mark, key=lambda m: m.name)
    assert SEVERITY[0] is Mark.FAILED and SEVERITY[-1] is Mark.NOT_APPLICABLE


def _trial(scenario, backend, variant, verdict="stale write rejected", safety="safe", index=0, status="ok"):
    return {"id": f"{scenario}/{backend}/{variant}/{index}", "scenario": scenario, "backend": backend,
            "variant": variant, "index": index, "status": status, "verdict": verdict, "safety": safety,
            "exercised": True, "measures": {}, "reason": "n/a here" if status == "skipped" else None}


META = {"capabilities": {"etcd_fenced": ["exclusion", "fencing", "lease_expiry"],
                         "redis": ["exclusion", "lease_expiry"]},
        **to_meta([f for f in scenarios.fault_columns() if f.scenario in ("pause", "server_pause", "restart")])}


def _view(planted: bool) -> RunView:
    trials = [_trial("pause", "etcd_fenced", "sigstop"), _trial("server_pause", "etcd_fenced", "sigstop"),
              _trial("restart", "etcd_fenced", "server_restart"),
              _trial("restart", "etcd_fenced", "aof_always", status="skipped", verdict=""),
              _trial("pause", "redis", "sigstop"), _trial("server_pause", "redis", "sigstop"),
              _trial("restart", "redis", "server_restart"), _trial("restart", "redis", "aof_always")]
    if planted:  # one fault of the pauses family fails, for one backend
        trials[4] = _trial("pause", "redis", "sigstop", "stale write accepted", "unsafe")
    return RunView.of(trials, META)


def test_a_planted_failure_in_one_fault_makes_its_familys_cell_fail_and_no_other():
    clean, planted = summary_of(_view(False)), summary_of(_view(True))
    assert clean.families == planted.families == [FaultFamily.PAUSES, FaultFamily.RESTARTS]
    cells = {backend: {c.family: c for c in row} for backend, row in planted.rows}
    assert cells["redis"][FaultFamily.PAUSES].worst is Mark.FAILED
    assert cells["redis"][FaultFamily.PAUSES].text == "✗ 1 · ✓ 1"
    assert cells["redis"][FaultFamily.RESTARTS].text == "✓ 2"
    assert cells["etcd_fenced"][FaultFamily.RESTARTS].text == "✓ 1 · n/a 1"
    before = {backend: {c.family: c.text for c in row} for backend, row in clean.rows}
    assert before["redis"][FaultFamily.PAUSES] == "✓ 2" and before["etcd_fenced"] == {
        f: c.text for f, c in cells["etcd_fenced"].items()}
    text = section_fault_summary(_view(True))
    assert "| redis | ✗ 1 · ✓ 1 | ✓ 2 |" in text
    assert "[pauses](REPORT-matrix.md#pauses)" in text


def test_a_family_that_says_nothing_for_every_backend_is_not_a_column():
    trials = [_trial("pause", "redis", "sigstop"), _trial("restart", "redis", "server_restart", status="skipped"),
              _trial("restart", "redis", "aof_always", status="skipped")]
    (table,) = summary_tables(RunView.of(trials, META))
    assert table.summary.families == [FaultFamily.PAUSES]


# --- the appendix's split -------------------------------------------------------------------------------------

def _wide_old_run() -> RunView:
    """A run recorded before families, with a trial under every registered column, one of them n/a for every
    backend: its columns (every registered one) are all OTHER, a family the split must still cut to width."""
    meta = _without_families(to_meta(scenarios.fault_columns()))
    trials = []
    for fault in scenarios.fault_columns():
        for column in fault.columns:
            for backend in ("redis", "etcd_fenced"):
                status = "skipped" if (fault.scenario, column.variant) == ("pause", "sigstop") else "ok"
                trials.append(_trial(fault.scenario, backend, column.variant, status=status))
    return RunView.of(trials, {**META, **meta})


def test_no_table_of_the_appendix_is_wider_than_the_limit_and_a_column_that_says_nothing_is_dropped(
        nothing_installed):
    view = _wide_old_run()
    sections = split_tables(view)
    assert [s.family for s in sections] == [FaultFamily.OTHER]
    tables = sections[0].tables
    assert len(tables) == 3 and [t.part for t in tables] == [1, 2, 3]
    assert all(len(t.table.headers) <= COLUMN_LIMIT for t in tables)
    shown = [label for t in tables for label in t.table.labels]
    every = sum(len(f.columns) for f in scenarios.fault_columns())
    assert "holder paused past the TTL" not in shown and len(shown) == len(set(shown)) == every - 1
    text = section_matrix(view)
    widths = [line.count(" | ") + 1 for line in text.splitlines() if line.startswith("| backend |")]
    assert len(widths) == 3 and max(widths) <= COLUMN_LIMIT
    assert "holder paused past the TTL" not in text.split("## Other", 1)[1].split("The columns:", 1)[0]
    assert "### Every backend (part 2 of 3)" in text


def test_a_row_that_says_nothing_is_named_under_its_table_not_printed():
    trials = [_trial("pause", "redis", "sigstop"), _trial("pause", "etcd_fenced", "sigstop", status="skipped")]
    text = section_matrix(RunView.of(trials, META))
    pauses = text.split("## Pauses", 1)[1]
    assert "| redis | ✓ stale write rejected 1/1 · ≤95% |" in pauses and "| etcd_fenced |" not in pauses
    assert "Left out, n/a or not run under each fault above: etcd_fenced." in pauses
