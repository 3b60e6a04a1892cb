"""The matrix's cells by family of faults (lab/declarations/columns.py FaultFamily): what the summary matrix, the matrix
appendix's tables and report.html's expanding columns all read, so the three agree.

A family's cell for one backend is the worst mark among that family's cells (worst by lab/report/matrix.py
SEVERITY), shown with how many of its cells gave each mark: '✗ 2 · ✓ 5 · ○ 1 · n/a 3'.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from lab.declarations.columns import FaultFamily
from lab.report.families import TABLE_ORDER, table_of
from lab.decision.cells import Mark, severity
from lab.report.matrix import IDLE_MARKS, MatrixCell, declared_run, matrix_rows
from lab.report.sections import RunView, once_per_view


DRIVERS = "drivers"  # the key of the driver rows' table in lab/report/families.py


def says_nothing(cells: list[MatrixCell]) -> bool:
    """True when every cell is n/a or not run: a column (or a family) of such cells is not printed."""
    return all(c.cell.mark in IDLE_MARKS for c in cells)


@dataclass(frozen=True)
class FamilyCell:
    """One backend under one family of faults: its cells there, summed up as marks and counts."""

    backend: str
    family: FaultFamily
    cells: tuple[MatrixCell, ...]

    @property
    def counts(self) -> list[tuple[Mark, int]]:
        """(mark, how many of the family's cells gave it), worst mark first."""
        found = Counter(c.cell.mark for c in self.cells)
        return sorted(found.items(), key=lambda kv: severity(kv[0]))

    @property
    def worst(self) -> Mark:
        return self.counts[0][0] if self.cells else Mark.NOT_APPLICABLE

    @property
    def text(self) -> str:
        """'✗ 2 · ✓ 5 · ○ 1 · n/a 3'; a family that applies to none of the backend's faults is just 'n/a'."""
        counts = self.counts
        if [mark for mark, _ in counts] in ([], [Mark.NOT_APPLICABLE]):
            return Mark.NOT_APPLICABLE.value
        return " · ".join(f"{mark.value} {n}" for mark, n in counts)


@dataclass(frozen=True)
class Summary:
    """Backends (rows, in the run's order) against families of faults (columns, in FaultFamily's order)."""

    families: list[FaultFamily]
    rows: list[tuple[str, list[FamilyCell]]]

    def column(self, family: FaultFamily) -> list[MatrixCell]:
        """Every cell of every row under one family."""
        index = self.families.index(family)
        return [c for _, cells in self.rows for c in cells[index].cells]


def family_of_columns(run: RunView) -> dict[tuple[str, str], FaultFamily]:
    """(scenario, variant) -> the family its column declares, for every column these runs have trials for."""
    return {(scenario, c.variant): c.family for scenario, c in declared_run(run)}


def summary_of(run: RunView, backends: set[str] | None = None) -> Summary:
    """The summary matrix of some rows (every row when backends is None). A fault that says nothing for every one
    of these rows is counted in no cell, and a family left with no fault is left out."""
    family = family_of_columns(run)
    rows = [(backend, cells) for backend, cells in matrix_rows(run) if backends is None or backend in backends]
    width = len(rows[0][1]) if rows else 0
    speaks = [i for i in range(width) if not says_nothing([cells[i] for _, cells in rows])]
    rows = [(backend, [cells[i] for i in speaks]) for backend, cells in rows]  # as the appendix leaves them out
    present = [f for f in FaultFamily if any(family.get((c.scenario, c.variant)) is f for _, cells in rows
                                             for c in cells)]
    return Summary(present, [(backend, [FamilyCell(backend, f, tuple(c for c in cells
                                                                    if family[(c.scenario, c.variant)] is f))
                                        for f in present]) for backend, cells in rows])


@dataclass(frozen=True)
class SummaryTable:
    """One table of the summary: the backends' rows (title None), or the session locks on other drivers."""

    title: str | None
    summary: Summary


@once_per_view
def summary_tables(run: RunView) -> list[SummaryTable]:
    """The backends' summary, then the driver rows' apart (lab/report/families.py puts them in a table of their
    own): a driver run covers a few faults, so its rows would fill the backends' table with *not run*."""
    backends = [backend for backend, _ in matrix_rows(run)]
    tables = {backend: table_of(run.meta, backend) for backend in backends}
    drivers = {b for b, t in tables.items() if t is not None and t.key == DRIVERS}
    out = [SummaryTable(None, summary_of(run, set(backends) - drivers))]
    if drivers:
        out.append(SummaryTable(next(t.title for t in TABLE_ORDER if t.key == DRIVERS), summary_of(run, drivers)))
    return [t for t in out if t.summary.rows and t.summary.families]
