"""The full matrix, split for reading: a section per family of faults, in it a table per family of locks, no table
wider than COLUMN_LIMIT columns, no column that says nothing (n/a or not run for every row of its table) and no row
that says nothing (it is named under its table).

REPORT-matrix.md prints these (section_matrix, below) and report.html makes their cells clickable
(lab/report/html.py); both read split_tables(), so the page finds each table it is given.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.declarations.columns import Column, FaultFamily
from lab.report.common import md_table
from lab.report.fault_groups import family_of_columns, says_nothing
from lab.report.fault_summary import family_title
from lab.report.chart_cache import Drawing
from lab.report.charts import matrix_chart
from lab.report.matrix import FamilyTable, Mark, columns_run, declared_run, family_tables_of, matrix_rows
from lab.report.libraries import languages_recorded
from lab.report.sections import MATRIX, RunView, once_per_view, section

# The matrix as colours, for a Markdown reader: report.html shows the grid itself in its place.
MATRIX_PNG = "matrix.png"

COLUMN_LIMIT = 20  # columns of one table, the backend's (and the library's) included


@dataclass(frozen=True)
class SplitTable:
    """One printed table: the rows of one family of locks, under some columns of one family of faults."""

    family: FaultFamily
    table: FamilyTable  # its title, lead columns and rows, with only this table's columns
    part: int  # 1-based; a family of locks whose columns do not fit in one table is printed in parts
    parts: int
    quiet: list[str]  # rows left out (n/a or not run under every column of the table), named under its last part

    @property
    def heading(self) -> str:
        title = self.table.title or "Every backend"
        return title if self.parts == 1 else f"{title} (part {self.part} of {self.parts})"


@dataclass(frozen=True)
class FamilySection:
    """One family of faults: its columns, its tables, and the families of locks it says nothing about."""

    family: FaultFamily
    columns: list[tuple[str, Column]]  # those its tables print
    tables: list[SplitTable]
    silent: list[str]  # titles of the families of locks whose every cell here is n/a or not run


def _restricted(table: FamilyTable, keep: list[int]) -> FamilyTable:
    return FamilyTable(table.title, [table.labels[i] for i in keep],
                       [(backend, [cells[i] for i in keep]) for backend, cells in table.rows], table.libraries)


def _parts(table: FamilyTable, family: FaultFamily, quiet: list[str]) -> list[SplitTable]:
    """A table cut into parts of at most COLUMN_LIMIT columns, its lead columns repeated in each; quiet: the rows
    left out of it, named under its last part."""
    per = max(1, COLUMN_LIMIT - (len(table.headers) - len(table.labels)))
    chunks = [list(range(at, min(at + per, len(table.labels)))) for at in range(0, len(table.labels), per)]
    return [SplitTable(family, _restricted(table, chunk), n, len(chunks), quiet if n == len(chunks) else [])
            for n, chunk in enumerate(chunks, 1)]


@once_per_view
def split_tables(run: RunView) -> list[FamilySection]:
    """Every family of faults with a column here, in FaultFamily's order, each with its tables."""
    family = family_of_columns(run)
    lock_tables = family_tables_of(run)  # each already without the columns that say nothing for its rows
    sections = []
    for f in FaultFamily:
        columns = [(scenario, c) for scenario, c in declared_run(run) if c.family is f]
        if not columns:
            continue
        tables, silent = [], []
        for table in lock_tables:
            first = table.rows[0][1] if table.rows else []
            keep = [i for i, c in enumerate(first) if family[(c.scenario, c.variant)] is f
                    and not says_nothing([cells[i] for _, cells in table.rows])]
            if keep:
                chosen = _restricted(table, keep)
                rows = [(backend, cells) for backend, cells in chosen.rows if not says_nothing(cells)]
                quiet = [backend for backend, cells in chosen.rows if says_nothing(cells)]
                tables += _parts(FamilyTable(chosen.title, chosen.labels, rows, chosen.libraries), f, quiet)
            else:
                silent.append(table.title or "Every backend")
        shown = {(c.scenario, c.variant) for split in tables for c in split.table.rows[0][1]}
        if tables:
            sections.append(FamilySection(f, [(s, c) for s, c in columns if (s, c.variant) in shown], tables, silent))
    return sections


def split_markdown(run: RunView) -> list[str]:
    """The sections as Markdown lines: a heading per family of faults, its meaning, its tables, its columns."""
    out: list[str] = []
    for part in split_tables(run):
        meaning = part.family.meaning
        out += [f"## {family_title(part.family)}", "", f"{meaning[:1].upper()}{meaning[1:]}.", ""]
        for split in part.tables:
            body = [[*split.table.lead(backend), *[c.cell.text for c in cells]] for backend, cells in split.table.rows]
            out += [f"### {split.heading}", "", md_table(split.table.headers, body), ""]
            if split.quiet:
                out += [f"Left out, n/a or not run under each fault above: {', '.join(split.quiet)}.", ""]
        if part.silent:
            out += [f"Not shown, n/a or not run under every fault here: {'; '.join(part.silent)}.", ""]
        out += ["The columns:", "",
                *[f"- *{c.label}* (`{scenario}`/`{c.variant}`): {c.legend}." for scenario, c in part.columns], ""]
    return out


@section(20, file=MATRIX)
def section_matrix(run: RunView) -> str | None:
    """The matrix appendix: every cell, a section per family of faults (lab/report/matrix_split.py)."""
    charts = run.charts
    columns = columns_run(run)
    if not columns:
        return None
    rows, cells = [], []
    for backend, judged in matrix_rows(run):
        rows.append([backend, *[c.cell.text for c in judged]])
        cells.append([c.cell for c in judged])
    if charts is not None:
        charts[MATRIX_PNG] = Drawing(matrix_chart, ([r[0] for r in rows], [label for _, label in columns],
                                                      [[c.mark.name for c in row] for row in cells]))
    flat = [c for row in cells for c in row]
    unrecorded = sum(c.unrecorded for c in flat if c.mark is Mark.KEPT)
    lost = any(c.mark is Mark.LOST for c in flat)
    return "\n".join([
        "# Every backend under every fault", "",
        "Each cell is the measured outcome with its trial count: ✗ marks a failure of the lock's one job "
        "(another run got in while the holder still believed it held: *lost*; the holder's write accepted after "
        "that: *stale write accepted*; two rebuilds in one company: *merged*; a killed lock session, however "
        "soon detected: *lost within one poll*, *detected late*, *never detected*), ✓ a fault that took the "
        "lock away while the company stayed whole (*held*, *stale write rejected* by the fence, *rolled back* "
        "with the transaction, *intact*); *k/N exercised*: the fault took the lock away in only k trials. "
        "○ *not exercised*: the fault struck but never took the lock away, so the cell proves nothing either "
        "way. *n/a*: the fault does not apply to that backend; *does not run*: the library cannot work "
        "against the lab's servers (*Every outcome* gives both reasons). "
        + ("In the third-party libraries' table, *library* is the library's project, the version the run had "
           "installed and the language of its client; a library's rows sit together, Python's first. "
           if languages_recorded(run.meta) else "")
        + ("⚠ *lost*: another run got the lock while the holder still believed it held, in trials that write "
           "nothing after that (the post's cases, the detector check): the cell shows the lock failed, and the "
           "columns where the holder writes show whether the company paid for it. " if lost else "")
        + (f"{unrecorded} of the trials behind ✓ cells come from runs that did not record whether the fault "
           "took the lock away: those cells say the company stayed whole, not that the fault was exercised. "
           if unrecorded else "")
        + "Lease and lock TTLs, and the idle guard on the holder's PostgreSQL sessions, are the profile's "
        "`ttl_s`. Reproduce: `lab run --backend all --scenario all`.", "",
        "Below, a section per family of faults (REPORT.md's summary sums each), a table per family of locks, and "
        "each column with what its fault does and what confirms in every trial that it struck (a trial whose fault "
        "cannot confirm it is an error, never a verdict). A column n/a or not run for every row of its table is "
        "not printed, nor a row n/a or not run in every column (each table names its rows left out).", "",
        *split_markdown(run),
        "![the matrix as colours: red failed, green kept the company whole, light blue-grey not exercised "
        "(the fault never took the lock away), amber safety unknown, grey not applicable or not run]"
        f"({MATRIX_PNG})", ""])
