"""report.html's matrices as grids: the summary (backends against families of faults, each family opening into its
faults) and the appendix's tables, every fault cell a button that opens its trials.

A grid's header row and backend column stay in view while it scrolls (sticky, lab/report/html_assets.py); its
cells are reached with the arrow keys (one of them in the tab order at a time). Each fault cell names its data
by index (CellIndex): the page keeps one copy of each cell's data, however many grids show it, CELLS_PER_BLOCK cells
to a block.
"""

from __future__ import annotations

from typing import Callable

from lab.report.fault_groups import SummaryTable
from lab.report import html_data
from lab.report.html_data import cell_data, json_for_script, packed_json
from lab.report.markdown_html import attribute
from lab.report.matrix import FamilyTable, MatrixCell

Inline = Callable[[str], str]  # Markdown of one line -> HTML
RowAttributes = Callable[[str], str]  # backend -> the attributes of its <tr> (the filters read them)


class CellIndex:
    """Each matrix cell's place in the page's data, given once: the first grid to show a cell numbers it."""

    def __init__(self, also_drawn: frozenset[str] = frozenset()):
        self.also_drawn = also_drawn  # trial ids whose timeline the page draws besides each cell's pictured one
        self.places: dict[tuple[str, str, str], int] = {}
        self.packed: list[str] = []  # the blocks filled so far, packed
        self.texts: list[str] = []  # the JSON of each cell of the block being filled

    def index(self, c: MatrixCell) -> int:
        key = (c.backend, c.scenario, c.variant)
        if key not in self.places:
            self.places[key] = len(self.places)
            self.texts.append(json_for_script(cell_data(c, self.also_drawn)))
            if len(self.texts) == html_data.CELLS_PER_BLOCK:  # a block is packed as soon as it is full
                self._pack()
        return self.places[key]

    def _pack(self) -> None:
        self.packed.append(packed_json("[" + ",".join(self.texts) + "]"))
        self.texts = []

    def blocks(self) -> list[str]:
        """The cells' data as the page keeps it: block k holds cells k * CELLS_PER_BLOCK onwards, packed as one JSON
        array (lab/report/html_data.py packed())."""
        if self.texts:
            self._pack()
        return self.packed


def fault_cell(c: MatrixCell, index: int, inline: Inline, family: str | None = None) -> str:
    """A fault's cell: a button opening its trials (data-cell names its data); in the summary, one of a family's
    faults, hidden until the family opens."""
    folded = f' data-family="{family}" hidden' if family is not None else ""
    return (f'<td class="cell{" fault" if family is not None else ""} mark-{c.cell.mark.name}" role="button" '
            f'tabindex="-1" data-cell="{index}" data-backend="{attribute(c.backend)}" '
            f'data-scenario="{attribute(c.scenario)}" data-variant="{attribute(c.variant)}" '
            f'data-mark="{c.cell.mark.name}"{folded}>{inline(c.cell.text)}</td>')


def column_attributes(c: MatrixCell) -> str:
    """Which fault column a header heads."""
    return f'data-scenario="{attribute(c.scenario)}" data-variant="{attribute(c.variant)}"'


def backend_header(backend: str, inline: Inline) -> str:
    return (f'<th scope="row">{inline(f"`{backend}`")}'
            '<span class="fit" title="qualifies for the needs it can serve">★</span></th>')


def first_in_tab_order(html: str) -> str:
    """A grid's first cell reachable by Tab; the arrow keys move from there."""
    return html.replace('tabindex="-1"', 'tabindex="0"', 1)


def summary_grid(table: SummaryTable, cells: CellIndex, inline: Inline, row: RowAttributes,
                 legends: dict[tuple[str, str], str]) -> str:
    """The summary as a grid: a column per family (its cell the family's worst mark with counts), followed by its
    faults' columns, hidden until the family is opened."""
    summary = table.summary
    first = summary.rows[0][1] if summary.rows else []
    head = ['<th class="corner">backend</th>']
    for family, family_cell in zip(summary.families, first):
        key = family.value
        head.append(f'<th class="family" data-family="{key}" title="{attribute(family.meaning)}">'
                    f'<button type="button" class="expand" data-family="{key}" aria-expanded="false">'
                    f'{attribute(family.heading)} <span class="faults">{len(family_cell.cells)}</span></button></th>')
        head += [f'<th class="fault" data-family="{key}" {column_attributes(c)} hidden '
                 f'title="{attribute(legends.get((c.scenario, c.variant), ""))}">{inline(c.label)}</th>'
                 for c in family_cell.cells]
    body = []
    for backend, family_cells in summary.rows:
        tds = [backend_header(backend, inline)]
        for f in family_cells:
            key = f.family.value
            tds.append(f'<td class="family-cell mark-{f.worst.name}" tabindex="-1" data-family="{key}" '
                       f'data-backend="{attribute(backend)}" data-worst="{f.worst.name}">{inline(f.text)}</td>')
            tds += [fault_cell(c, cells.index(c), inline, key) for c in f.cells]
        body.append(f"<tr {row(backend)}>" + "".join(tds) + "</tr>")
    caption = f"<caption>{inline(table.title)}</caption>" if table.title else ""
    return first_in_tab_order("\n".join([
        '<div class="grid-scroll summary-scroll">', f'<table class="matrix summary" data-grid>{caption}',
        f"<thead><tr>{''.join(head)}</tr></thead>", "<tbody>", *body, "</tbody>", "</table>", "</div>"]))


def matrix_grid(table: FamilyTable, cells: CellIndex, inline: Inline, row: RowAttributes) -> str:
    """One table of the matrix appendix as a grid, every fault cell a button."""
    first_fault = len(table.headers) - len(table.labels)  # after the backend (and its library)
    faults = table.rows[0][1] if table.rows else []
    head = ('<th class="corner">backend</th>' + "".join(f"<th>{inline(h)}</th>" for h in table.headers[1:first_fault])
            + "".join(f"<th {column_attributes(c)}>{inline(h)}</th>"
                      for c, h in zip(faults, table.headers[first_fault:])))
    body = []
    for backend, row_cells in table.rows:
        tds = [backend_header(backend, inline), *[f"<td>{inline(text)}</td>" for text in table.lead(backend)[1:]],
               *[fault_cell(c, cells.index(c), inline) for c in row_cells]]
        body.append(f"<tr {row(backend)}>" + "".join(tds) + "</tr>")
    return first_in_tab_order("\n".join([
        '<div class="grid-scroll">', '<table class="matrix" data-grid>', f"<thead><tr>{head}</tr></thead>",
        "<tbody>", *body, "</tbody>", "</table>", "</div>"]))
