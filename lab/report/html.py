"""report.html: the summary matrix first, as a tool, then REPORT.md and its appendices, on one self-contained page.

One file to open from disk or attach to a ticket, so it fetches nothing: its CSS, its script and its data are
inside it. Below the answer is the summary (backends against families of faults, lab/report/fault_groups.py):
a family opens into its faults, a fault's cell opens its trials (verdict, the fault's evidence, the checkers'
findings, the history as a table, the timeline drawn as SVG), the header row and the backend column stay in view
while it scrolls, and the arrow keys move between cells. Nothing heavy is read before it is wanted: the cells' data
sits in blocks of CELLS_PER_BLOCK cells (gzipped JSON, a block inflated when one of its cells is opened), and each
picture's PNG (with a palette, lab/report/charts.py palette_png) in a block of its own, attached when it scrolls into
view. Filters keep the rows of one family of lock (from what the run's meta.json
says each backend declares) or of one need (the decision page's). Above the grid, the page opens on the answer
(lab/report/html_answer.py): each need's lock for every stack, and for each stack it names, computed in Python;
the choice is kept in the page's address.
Rendered from the run view alone, so the same runs give the same bytes.
"""

from __future__ import annotations

import base64
from typing import Callable

from lab.report.chart_cache import Drawing, png_of
from lab.report.charts import palette_png
from lab.report.decide import NEEDS, can_serve, qualifying
from lab.report.families import FAMILIES, families_of
from lab.report.fault_groups import summary_tables
from lab.report.fault_summary import headers as summary_headers
from lab.report.html_assets import script, style
from lab.report.html_data import CELLS_PER_BLOCK, json_for_script, packed, unpacked
from lab.report.html_grid import CellIndex, matrix_grid, summary_grid
from lab.report.html_answer import ANSWER_SCRIPT, ANSWER_STYLE, answers_html
from lab.report.markdown_html import MarkdownHtml, attribute
from lab.report.matrix import columns_run, declared_run, matrix_rows
from lab.report.matrix_split import MATRIX_PNG, split_tables
from lab.report.sections import MAIN, RunView
from lab.report.timelines import failing_trials, has_history, slug

PAGE = "report.html"
__all__ = ["PAGE", "render_html", "families_of", "json_for_script", "embedded_png", "packed", "unpacked",
           "CELLS_PER_BLOCK"]


def embedded_png(png: bytes) -> str:
    """A PNG as a data: URI, re-encoded with a palette when that is smaller (lab/report/charts.py palette_png),
    which the chart cache keeps beside the chart (lab/report/chart_cache.py)."""
    return "data:image/png;base64," + base64.b64encode(png_of(Drawing(palette_png, (png,)))).decode("ascii")


def png_size(png: bytes) -> tuple[int, int]:
    """A PNG's width and height in pixels (its IHDR), so the page keeps its place before it is attached."""
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


class Page:
    """The page of one run view: its grids, their cells' data, its pictures, and the Markdown files as HTML."""

    def __init__(self, view: RunView, picture_bytes: Callable[[str], bytes | None]):
        self.view, self.picture_bytes = view, picture_bytes
        self.columns = columns_run(view)
        self.rows = matrix_rows(view)
        self.qualifying = qualifying(view)  # need index -> the backends the decision page says qualify
        self.summaries = summary_tables(view)
        self.split = [t for part in split_tables(view) for t in part.tables]  # the appendix's tables, in order
        self.matched = 0  # how many of them the Markdown has met so far
        # The timeline appendix's pictures of trials with a history are drawn by the page from their data.
        self.gallery = {slug(r["scenario"], r["backend"], r["variant"]): r for _, r in failing_trials(view)
                        if has_history(r)}
        self.cells = CellIndex(frozenset(r["id"] for r in self.gallery.values()))
        self.by_key = {(c.backend, c.scenario, c.variant): c for _, cells in self.rows for c in cells}
        self.pngs: list[str] = []  # data: URIs, each in a block of its own, attached when shown
        self.converter = MarkdownHtml(image=self._image, link=self._link, table=self._table)
        self.files: list[str] = []
        self.row_cache: dict[str, str] = {}
        self.labels = {c.label: (scenario, c.variant) for scenario, c in declared_run(view)}

    def cell_for(self, backend: str, label: str) -> int | None:
        """The page's index of a backend's cell under the fault column with this label, or None where it has none."""
        if label not in self.labels:
            return None
        scenario, variant = self.labels[label]
        cell = self.by_key.get((backend, scenario, variant))
        return None if cell is None else self.cells.index(cell)

    def _image(self, src: str, alt: str) -> str | None:
        if src == MATRIX_PNG:  # the grid at the top of the page shows what the picture shows, and opens its cells
            return ('<span class="pointer"><a href="#tool">The matrix as colours is the summary grid at the top of '
                    "the page</a>, every cell of it clickable.</span>")
        record = self.gallery.get(src)
        if record is not None:
            index = self.cells.index(self.by_key[(record["backend"], record["scenario"], record["variant"])])
            return (f'<figure class="timeline" id="{picture_id(src)}" data-timeline-cell="{index}" '
                    f'data-trial="{attribute(record["id"])}" aria-label="{attribute(alt)}"></figure>')
        png = self.picture_bytes(src)
        if png is None:
            return f'<span class="missing">[{attribute(alt)}: {attribute(src)} not drawn]</span>'
        self.pngs.append(embedded_png(png))
        width, height = png_size(png)
        return (f'<img id="{picture_id(src)}" data-picture="{attribute(src)}" data-png="png-{len(self.pngs) - 1}" '
                f'width="{width}" height="{height}" alt="{attribute(alt)}">')

    def _link(self, href: str) -> str | None:
        if href in self.files:
            return "#" + file_id(href)
        if href.endswith(".png") and (href in self.gallery or self.picture_bytes(href) is not None):
            return "#" + picture_id(href)
        if "#" in href and href.split("#", 1)[0] in self.files:  # a section of another file: the file
            return "#" + file_id(href.split("#", 1)[0])
        return None  # nothing in the page to go to: the words stay, without a link

    def _table(self, headers: list[str], rows: list[list[str]]) -> str | None:
        """The summary's tables (shown at the top of the page: here a pointer to them) and the appendix's, each
        recognised by its computed header and rows; any other table is the converter's."""
        names = [r[0] for r in rows]
        for summary in (t.summary for t in self.summaries):
            if headers == summary_headers(summary) and names == [b for b, _ in summary.rows]:
                return ('<p class="pointer"><a href="#tool">This table is the summary matrix at the top of the '
                        "page</a>, where a family opens into its faults and a fault's cell into its trials.</p>")
        if self.matched < len(self.split):
            table = self.split[self.matched].table
            if headers == table.headers and names == [b for b, _ in table.rows]:
                self.matched += 1
                return matrix_grid(table, self.cells, self.converter.inline, self.row_attributes)
        return None

    def row_attributes(self, backend: str) -> str:
        """A row's data for the filters: its families of lock, the needs it can serve, whether it qualifies."""
        if backend not in self.row_cache:
            meta = self.view.meta
            serves = [str(i) for i, need in enumerate(NEEDS) if can_serve(need, meta, backend)]
            fits = any(backend in fit for fit in self.qualifying.values())
            self.row_cache[backend] = (f'data-backend="{attribute(backend)}" '
                                       f'data-families="{" ".join(families_of(meta, backend))}" '
                                       f'data-needs="{" ".join(serves)}" data-qualifies="{"yes" if fits else "no"}"')
        return self.row_cache[backend]

    def filters_html(self) -> str:
        meta = self.view.meta
        present = {key for backend, _ in self.rows for key in families_of(meta, backend)}
        families = "".join(f'<option value="{f.key}">{attribute(f.title)}</option>' for f in FAMILIES
                           if f.key in present)
        needs = "".join(f'<option value="{i}">{attribute(n.title)}</option>' for i, n in enumerate(NEEDS)
                        if any(can_serve(n, meta, b) for b, _ in self.rows))
        return ('<div class="filters" id="filters">'
                '<label>family of lock <select id="filter-family"><option value="">every family</option>'
                f"{families}</select></label> "
                '<label>need <select id="filter-need"><option value="">any need</option>'
                f"{needs}</select></label> "
                '<span id="filter-count"></span>'
                '<span class="hint">With a need chosen, ★ marks the locks the decision page says qualify.</span></div>')

    def tool_html(self) -> str:
        """The top of the page: the summary matrix as grids, with the filters."""
        if not self.summaries:
            return ""
        legends = {(scenario, c.variant): c.legend for scenario, c in declared_run(self.view)}
        grids = [summary_grid(t, self.cells, self.converter.inline, self.row_attributes, legends)
                 for t in self.summaries]
        return "\n".join(['<section id="tool">', f"<h1>{attribute(self.title)}</h1>",
                          answers_html(self.view, self.cell_for, self.converter.inline),
                          '<p class="lead">Every backend against every family of faults: each cell is the family\'s '
                          "worst mark, then how many of its faults gave each mark. Click a family (or press Enter on "
                          "it) to open its faults, a fault's cell for its trials; arrow keys move between cells, "
                          "Escape closes.</p>",
                          self.filters_html(), *grids, "</section>"])

    @property
    def title(self) -> str:
        return f"locklab report: {self.view.run_id}" if self.view.run_id else "locklab report"

    def render(self, files: dict[str, str]) -> str:
        self.files = list(files)
        order = [MAIN, *[name for name in files if name != MAIN]]
        tool = self.tool_html()
        sections = [f'<section id="{file_id(name)}" data-file="{attribute(name)}">\n'
                    f"{self.converter.blocks(files[name])}</section>" for name in order]
        nav = " · ".join(['<a href="#tool">summary</a>'] * bool(tool)
                         + [f'<a href="#{file_id(name)}">{attribute(name)}</a>' for name in order])
        blocks = [f'<script type="text/plain" id="cells-{i}">{block}</script>'  # CELLS_PER_BLOCK cells each
                  for i, block in enumerate(self.cells.blocks())]
        blocks += [f'<script type="text/plain" id="png-{i}">{uri}</script>' for i, uri in enumerate(self.pngs)]
        return "\n".join([
            "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{attribute(self.title)}</title>", f"<style>{style()}{ANSWER_STYLE}</style>", "</head>", "<body>",
            f'<nav class="files">{nav}</nav>', tool, "<main>", *sections, "</main>",
            '<aside id="panel" hidden><button id="panel-close" type="button" aria-label="close">×</button>'
            '<div id="panel-body"></div></aside>', *blocks,
            f"<script>{script()}</script>", *([f"<script>{ANSWER_SCRIPT}</script>"] if tool else []), "</body>",
            "</html>", ""])


def file_id(name: str) -> str:
    return "file-" + name.removesuffix(".md")


def picture_id(name: str) -> str:
    return "picture-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name.removesuffix(".png"))




def render_html(files: dict[str, str], view: RunView, picture_bytes: Callable[[str], bytes | None]) -> str:
    """The page's text. files: REPORT.md and its appendices, as the report renders them; picture_bytes(name):
    the PNG a file links (drawn beside REPORT.md), or None when it was not drawn."""
    return Page(view, picture_bytes).render(files)
