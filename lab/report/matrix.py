"""The backends x faults matrix: every backend against every fault, each cell measured, marked by safety."""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from lab.declarations.capabilities import Capability
from lab.declarations.columns import Column, FaultColumns
from lab.measures.kinds import Measured
from lab.declarations.post_role import PostRole
from lab.decision.cells import (Cell, Mark, against_previous,
                                judge, judge_in_column, severity)
from lab.decision.harm import Harm
from lab.decision.where import unaffected_reason, where_of
from lab.report.common import backend_with_role, declaration, md_table, ordered_backends, with_capability
from lab.report.declared import lease_faults, matrix_columns
from lab.report.families import TABLE_ORDER, table_of
from lab.report.libraries import Library, languages_recorded, library_of
from lab.report.sections import MATRIX, RunView, once_per_view, section

def cell(records: list[dict]) -> str:
    """'✗ stale write accepted 3/3' / '✓ held 3/3' / '○ not exercised: held 2/2' / 'n/a' / 'not run'."""
    return judge(records).text


def fault_records(frame: pd.DataFrame, backend: str, scenario: str, variant: str) -> list[dict]:
    """The records of one cell, in the frame's order: the backend's trials of the scenario's variant (or of a
    scenario with no variants, "-"). Each is a copy the caller may change."""
    return [dict(r) for r in _records_by_cell(frame).get((scenario, backend), ()) if r["variant"] in (variant, "-")]


# One index per frame: the report judges every cell three times over (matrix, decision page, timelines), and
# filtering the frame per cell took 50 s of the reference report's 60. Keyed by the frame's identity and shape,
# dropped with the frame.
_INDEXES: dict[int, tuple[weakref.ref, tuple, dict]] = {}


def _records_by_cell(frame: pd.DataFrame) -> dict[tuple[str, str], list[dict]]:
    key, shape = id(frame), (len(frame), tuple(frame.columns))
    known = _INDEXES.get(key)
    if known is not None and known[0]() is frame and known[1] == shape:
        return known[2]
    index: dict[tuple[str, str], list[dict]] = {}
    for record in frame.to_dict("records"):
        index.setdefault((record["scenario"], record["backend"]), []).append(record)
    _INDEXES[key] = (weakref.ref(frame, _forget(key)), shape, index)
    return index


def _forget(key: int) -> Callable[[weakref.ref], None]:
    """The callback that drops a frame's index when the frame goes."""
    def forget(_: weakref.ref) -> None:
        _INDEXES.pop(key, None)
    return forget


@once_per_view
def declared_run(run: RunView) -> list[tuple[str, Column]]:
    """(scenario, column) of every declared matrix column these runs have trials for, in column order."""
    ran = set(zip(run.frame.scenario, run.frame.variant))
    return [(scenario, c) for scenario, c in matrix_columns(run.meta)
            if (scenario, c.variant) in ran or (scenario, "-") in ran]


def columns_run(run: RunView) -> list[tuple[tuple[str, str], str]]:
    """((scenario, variant), heading) of every declared matrix column these runs have trials for."""
    return [((scenario, c.variant), c.label) for scenario, c in declared_run(run)]


@dataclass(frozen=True)
class MatrixCell:
    """One cell of the matrix with the trials behind it: what the HTML report's panel opens."""

    backend: str
    scenario: str
    variant: str
    label: str
    records: list
    cell: Cell


def control_of(frame: pd.DataFrame) -> str | None:
    """The run's no-lock control: the backend that declares itself the post's no-lock baseline."""
    return backend_with_role(frame, PostRole.NO_LOCK)


@once_per_view
def matrix_rows(run: RunView, harm: Harm = Harm.SURVIVING_COMPANY) -> list[tuple[str, list[MatrixCell]]]:
    """Every row of the matrix in the run's backend order, each cell judged from its trials beside its column's
    control (judge_in_column) and read for a harm (by default the surviving company: the lab's writes live in the
    database), *unaffected* where its ○ is out of the fault's reach by declaration, and marked ↯ with the previous
    reference's mark where the two differ. Judged once per view and harm: every reader shares these rows and
    changes none of them."""
    frame, columns = run.frame, declared_run(run)
    control = control_of(frame)
    before = _previous_cells(run)
    rows = []
    for backend in ordered_backends(frame) if columns else []:
        where = where_of(run.meta, backend)
        cells = []
        for scenario, column in columns:
            variant = column.variant
            reason = unaffected_reason(where, column.strikes, column.cannot_take_from(
                declaration(run.meta, "capabilities", backend) or ()))
            records = fault_records(frame, backend, scenario, variant)
            beside = fault_records(frame, control, scenario, variant) if control else []
            cell = judge_in_column(records, beside, backend == control, harm, reason)
            earlier = _in_variant(before.get((scenario, backend), []), variant)
            if earlier:
                controls = before.get((scenario, control), []) if control else []
                was = judge_in_column(earlier, _in_variant(controls, variant), backend == control, harm, reason)
                cell = against_previous(cell, was)
            cells.append(MatrixCell(backend, scenario, variant, column.label, records, cell))
        rows.append((backend, cells))
    return rows


def _previous_cells(run: RunView) -> dict[tuple[str, str], list[dict]]:
    """The previous reference's records by (scenario, backend)."""
    out: dict[tuple[str, str], list[dict]] = {}
    for record in run.previous:
        out.setdefault((record["scenario"], record["backend"]), []).append(record)
    return out


def _in_variant(records: list[dict], variant: str) -> list[dict]:
    """A cell's records among a scenario's: its variant's, or every one of a scenario with no variants ("-")."""
    return [r for r in records if r["variant"] in (variant, "-")]


# A column no row of a family ran is left out of its table; one that *does not run* here stays, to say so.
IDLE_MARKS = (Mark.NOT_APPLICABLE, Mark.NOT_RUN)


@dataclass(frozen=True)
class FamilyTable:
    """One table of the matrix: a family of locks (lab/report/families.py), with only the columns where one
    of its rows ran or cannot run here (the cells of the others are n/a or not run for every row).

    libraries: for the library table of a run that recorded its libraries' languages, each row's library
    ('redlock 4.2.0 (Node.js)'), shown in a column of its own after the backend; the rows are then grouped
    by library and language (lab/report/libraries.py)."""

    title: str | None  # None: the only table, for a run that declared no family
    labels: list[str]
    rows: list[tuple[str, list[MatrixCell]]]
    libraries: dict[str, str] = field(default_factory=dict)

    @property
    def cells(self) -> list[MatrixCell]:
        return [c for _, cells in self.rows for c in cells]

    @property
    def headers(self) -> list[str]:
        """The table's header: the backend, its library when the table shows one, then the fault columns."""
        return ["backend", *(["library"] if self.libraries else []), *self.labels]

    def lead(self, backend: str) -> list[str]:
        """A row's first cells: the backend, and its library when the table shows one."""
        return [backend, *([self.libraries.get(backend, "")] if self.libraries else [])]


@once_per_view
def family_tables_of(run: RunView) -> list[FamilyTable]:
    """The matrix's rows grouped into one table per family, in the families' order."""
    grouped: dict[str, tuple[str, list]] = {}
    for backend, cells in matrix_rows(run):
        table = table_of(run.meta, backend)
        key, title = (table.key, table.title) if table else ("", "Backends the run declared nothing of")
        grouped.setdefault(key, (title, []))[1].append((backend, cells))
    keys = [t.key for t in TABLE_ORDER if t.key in grouped] + ([""] if "" in grouped else [])
    tables = []
    for key in keys:
        title, members = grouped[key]
        keep = [i for i in range(len(members[0][1]))
                if any(cells[i].cell.mark not in IDLE_MARKS for _, cells in members)]
        libraries: dict[str, str] = {}
        if key == "library" and languages_recorded(run.meta):
            found = {backend: library_of(run.meta, backend) for backend, _ in members}
            members = sorted(members, key=lambda row: _library_order(found[row[0]]))  # stable: the run's order within
            libraries = {backend: library.label() for backend, library in found.items() if library is not None}
        tables.append(FamilyTable(title if len(keys) > 1 else None, [members[0][1][i].label for i in keep],
                                  [(backend, [cells[i] for i in keep]) for backend, cells in members], libraries))
    return tables


def _library_order(library: Library | None) -> tuple:
    return library.order() if library is not None else ()


def lease_faults_run(run: RunView) -> list[FaultColumns]:
    """The lease faults these runs ran, in column order."""
    ran = set(run.frame.scenario)
    return [f for f in lease_faults(run.meta) if f.scenario in ran]


POST_LEASE_ROW = ("The holder can lose the lock and keep writing, so the database must check a fencing token. "
                  "A lease row does, at an extra write per company and one hot row. (Reasoned, not run, in the post.)")


@section(160)
def section_why_not_leases(run: RunView) -> str | None:
    """The post's 'Redis, etcd or a lease row' row of Why not just...?, backed by the lease-fault cells of every
    backend whose right is a lease (capability `lease_expiry`): the matrix's own cells, judged beside the control,
    one per fault (a scenario with several columns shows its worst, with how many of its faults gave each mark:
    trials of different faults are never pooled into one count)."""
    frame = run.frame
    faults = lease_faults_run(run)
    relevant = with_capability(frame[frame.scenario.isin([f.scenario for f in faults])], Capability.LEASE_EXPIRY)
    if relevant.empty:
        return None
    leases = set(relevant.backend)
    by_scenario: dict[tuple[str, str], list[MatrixCell]] = {}
    for backend, cells in matrix_rows(run):
        if backend in leases:
            for c in cells:
                by_scenario.setdefault((backend, c.scenario), []).append(c)
    rows = [[backend, *[_lease_cell(by_scenario.get((backend, f.scenario), [])) for f in faults]]
            for backend in ordered_backends(relevant)]
    clusters = [f.scenario for f in faults if f.replicated]
    return "\n".join([
        "## Why not just Redis, etcd or a lease row?", "",
        f"The post: *{POST_LEASE_ROW}* Measured here, for every backend whose right is a lease with a TTL: the "
        "holder is paused (SIGSTOP), cut off from its lock service (a blackholing proxy) or sees the lock server "
        "restart, for longer than the TTL; a second run takes the company; the holder then writes. "
        + ("In the replicated columns the lock service loses a server instead: a PostgreSQL standby or a Redis "
           "replica promoted (with the replica caught up or held behind), a Redlock master that granted "
           "restarted, an etcd member partitioned or its leader killed. " if clusters else "")
        + f"Each cell is the matrix's, judged beside the no-lock control ([{MATRIX}]({MATRIX})); a fault with "
        "several variants shows its worst cell and how many of its variants gave each mark. Reproduce: "
        f"`lab run --backend all --scenario {','.join(f.scenario for f in faults)}`.",
        "", md_table(["backend", *[f.title for f in faults]], rows), "",
        *_token_evidence(relevant)])


def _lease_cell(cells: list[MatrixCell]) -> str:
    """One fault's cell, or for several variants the worst one's text and each mark's count."""
    shown = [c for c in cells if c.cell.mark is not Mark.NOT_APPLICABLE] or cells
    if not shown:
        return "not run"
    if len(shown) == 1:
        return shown[0].cell.text
    worst = min(shown, key=lambda c: severity(c.cell.mark))
    counts = Counter(c.cell.mark for c in shown)
    tally = " · ".join(f"{mark.value} {n}" for mark, n in sorted(counts.items(), key=lambda kv: severity(kv[0])))
    return f"{worst.cell.text} ({tally} of {len(shown)} variants)"


def _token_evidence(relevant: pd.DataFrame) -> list[str]:
    """What the fencing tokens were when a fenced backend's lock server restarted."""
    lines = []
    restarted = with_capability(relevant[(relevant.measured == Measured.SERVER_RESTART) & (relevant.status == "ok")],
                                Capability.FENCING)
    for backend in ordered_backends(restarted):
        group = restarted[restarted.backend == backend]
        pairs = ", ".join(f"{m['holder']['token']} then {m['contender'].get('token')}" for m in group.measures)
        lines.append(f"- {backend} across a restart: holder's token then the next holder's: {pairs}.")
    if lines:
        lines = ["Fencing tokens across a restart (a fence refuses only a token lower than one it has seen; "
                 "*None*: the next run never got the lock):", "", *lines, ""]
    return lines
