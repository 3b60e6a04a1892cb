"""report.html: REPORT.md and its appendices as one self-contained page, where each matrix cell opens its trials.

One file to open from disk or attach to a ticket, so it fetches nothing: its CSS, its script, the panels'
data (one JSON blob) and every picture (PNG data: URIs) are inside it. A cell's panel shows each trial's
verdict, the fault's evidence, the checkers' findings and the history as a table, with the cell's timeline
drawn by the same functions as REPORT-timelines.md; filters keep the rows of one family of lock (from what
the run's meta.json says each backend declares) or of one need (the decision page's). Rendered from the run
view alone, so the same runs give the same bytes.
"""

from __future__ import annotations

import base64
import functools
import io
import json
import math
import string
import tempfile
from pathlib import Path
from typing import Callable

from lab.harness.outcomes import judgement_of
from lab.report.decide import NEEDS, can_serve, qualifying
from lab.report.families import FAMILIES, families_of
from lab.report.markdown_html import MarkdownHtml, attribute
from lab.report.matrix import FamilyTable, Mark, MatrixCell, columns_run, family_tables_of, matrix_rows
from lab.report.sections import MAIN, RunView
from lab.report.timelines import failing_trials, first_unsafe, history_of, history_picture, slug

PAGE = "report.html"


def embedded_png(png: bytes) -> str:
    """A PNG as a data: URI, re-encoded with a palette of 256 colours when that is smaller (a chart has few
    colours, so it looks the same at about a third of the bytes); deterministic like the PNG itself."""
    from PIL import Image

    picture: Image.Image = Image.open(io.BytesIO(png))
    if picture.mode == "RGBA" and picture.getchannel("A").getextrema() == (255, 255):
        picture = picture.convert("RGB")
    if picture.mode == "RGB":
        out = io.BytesIO()
        picture.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(out, "PNG", optimize=True)
        png = min(png, out.getvalue(), key=len)
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _plain(value):
    """A frame value as JSON: pandas' NaN for a field a record lacks becomes null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def trial_data(record: dict) -> dict:
    """What a panel shows of one trial: verdict, the fault's evidence, the judgement, the history as rows."""
    measures = _plain(record.get("measures")) or {}
    history = history_of(record)
    return {"id": record["id"], "run": _plain(record.get("run")), "status": record["status"],
            "verdict": _plain(record.get("verdict")), "reason": _plain(record.get("reason")),
            "safety": _plain(record.get("safety")), "exercised": _plain(record.get("exercised")),
            "evidence": measures.get("evidence"), "judgement": _plain(judgement_of(record)),
            # [time, process, type, f, value]: the history's ops, in order, as compact rows
            "history": None if history is None else [[o.time, o.process, o.type.value, o.f.value, o.value or None]
                                                     for o in history]}


def pictured(c: MatrixCell) -> dict | None:
    """The trial a cell's timeline shows: a failing cell's first unsafe trial (the one REPORT-timelines.md
    draws), else its first trial with a history; None for a cell without one."""
    first = first_unsafe(c.records) if c.cell.mark is Mark.FAILED else None
    return first if first is not None and history_of(first) else next((r for r in c.records if history_of(r)), None)


class Page:
    """The page of one run view: its matrix cells, their data and pictures, and the Markdown files as HTML."""

    def __init__(self, view: RunView, picture_bytes: Callable[[str], bytes | None]):
        self.view, self.picture_bytes = view, picture_bytes
        self.columns = columns_run(view)
        self.rows = matrix_rows(view)
        self.qualifying = qualifying(view)  # need index -> the backends the decision page says qualify
        self.tables = family_tables_of(view)  # the matrix as the report shows it: a table per family of lock
        self.matched = 0  # how many of them the Markdown has met so far
        self.shown: dict[str, str] = {}  # picture name -> data URI, for the pictures the Markdown shows
        self.pictures: dict[str, str] = {}  # those only a panel shows
        self.borrowed: dict[str, dict] = {}  # picture name -> trial, for a panel showing the appendix's picture
        self.cells: list[dict] = []
        self.converter = MarkdownHtml(image=self._image, link=self._link, table=self._table)
        self.files: list[str] = []

    def _image(self, src: str, alt: str) -> str | None:
        png = self.picture_bytes(src)
        if png is None:
            return f'<span class="missing">[{attribute(alt)}: {attribute(src)} not drawn]</span>'
        self.shown[src] = embedded_png(png)
        return (f'<img id="{picture_id(src)}" data-picture="{attribute(src)}" src="{self.shown[src]}" '
                f'alt="{attribute(alt)}">')

    def _link(self, href: str) -> str | None:
        if href in self.files:
            return "#" + file_id(href)
        if href.endswith(".png") and self.picture_bytes(href) is not None:
            return "#" + picture_id(href)
        return None  # nothing in the page to go to: the words stay, without a link

    def _table(self, headers: list[str], rows: list[list[str]]) -> str | None:
        """A table of the matrix, recognised by its computed header and rows, with a clickable cell each; the
        filters go before the first."""
        if self.matched >= len(self.tables):
            return None
        table = self.tables[self.matched]
        if headers != table.headers or [r[0] for r in rows] != [b for b, _ in table.rows]:
            return None
        self.matched += 1
        return self.matrix_html(table, with_filters=self.matched == 1)

    def matrix_html(self, table: FamilyTable, with_filters: bool) -> str:
        meta, frame = self.view.meta, self.view.frame
        head = "".join(f"<th>{self.converter.inline(h)}</th>" for h in table.headers)
        body = []
        for backend, cells in table.rows:
            serves = [str(i) for i, need in enumerate(NEEDS) if can_serve(need, meta, backend)]
            fits = any(backend in fit for fit in self.qualifying.values())
            tds = [f'<th scope="row">{self.converter.inline(f"`{backend}`")}'
                   f'<span class="fit" title="qualifies for the needs it can serve">★</span></th>',
                   *[f"<td>{self.converter.inline(text)}</td>" for text in table.lead(backend)[1:]]]
            for c in cells:
                index = len(self.cells)
                self.cells.append(self.cell_data(c))
                tds.append(f'<td class="cell mark-{c.cell.mark.name}" tabindex="0" role="button" '
                           f'data-cell="{index}" data-backend="{attribute(backend)}" '
                           f'data-scenario="{attribute(c.scenario)}" data-variant="{attribute(c.variant)}" '
                           f'data-mark="{c.cell.mark.name}">{self.converter.inline(c.cell.text)}</td>')
            body.append(f'<tr data-backend="{attribute(backend)}" '
                        f'data-families="{" ".join(families_of(meta, backend))}" data-needs="{" ".join(serves)}" '
                        f'data-qualifies="{"yes" if fits else "no"}">' + "".join(tds) + "</tr>")
        return "\n".join([self.filters_html() if with_filters else "", '<div class="scroll">',
                          '<table class="matrix">', f"<thead><tr>{head}</tr></thead>", "<tbody>", *body, "</tbody>",
                          "</table>", "</div>"])

    def filters_html(self) -> str:
        meta = self.view.meta
        present = {key for backend, _ in self.rows for key in families_of(meta, backend)}
        families = "".join(f'<option value="{f.key}">{attribute(f.title)}</option>' for f in FAMILIES
                           if f.key in present)
        needs = "".join(f'<option value="{i}">{attribute(n.title)}</option>' for i, n in enumerate(NEEDS)
                        if any(can_serve(n, meta, b) for b, _ in self.rows))
        return ('<div class="filters" id="filters">'
                '<label>family <select id="filter-family"><option value="">every family</option>'
                f"{families}</select></label> "
                '<label>need <select id="filter-need"><option value="">any need</option>'
                f"{needs}</select></label> "
                '<span id="filter-count"></span>'
                '<span class="hint">Click a cell for its trials. With a need chosen, ★ marks the locks the decision '
                "page says qualify.</span></div>")

    def cell_data(self, c: MatrixCell) -> dict:
        record = pictured(c)
        name = None
        if record is not None:
            name = slug(record["scenario"], record["backend"], record["variant"])
            if self.gallery.get(name) == record["id"]:
                self.borrowed[name] = record  # the page shows it in the timeline appendix: not stored twice
            else:
                name = f"cell:{record['id']}"
                self.pictures[name] = self.draw(record)
        return {"backend": c.backend, "scenario": c.scenario, "variant": c.variant, "label": c.label,
                "mark": c.cell.mark.name, "text": c.cell.text, "picture": name,
                "pictured": None if record is None else record["id"],
                "trials": [trial_data(r) for r in c.records]}

    @staticmethod
    def draw(record: dict) -> str:
        """A trial's history drawn as REPORT-timelines.md draws it, as a data: URI."""
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "timeline.png"
            history_picture(record)(path)
            return embedded_png(path.read_bytes())

    @functools.cached_property
    def gallery(self) -> dict[str, str]:
        """picture name -> trial id, for the timelines REPORT-timelines.md draws (the page shows them already)."""
        return {slug(r["scenario"], r["backend"], r["variant"]): r["id"] for _, r in failing_trials(self.view)}

    def render(self, files: dict[str, str]) -> str:
        self.files = list(files)
        order = [MAIN, *[name for name in files if name != MAIN]]
        sections = [f'<section id="{file_id(name)}" data-file="{attribute(name)}">\n'
                    f"{self.converter.blocks(files[name])}</section>" for name in order]
        for name, record in self.borrowed.items():  # the page's script finds these by name in the appendix
            if name not in self.shown:  # ... unless the appendix did not show it after all
                self.pictures[name] = self.draw(record)
        data = {"cells": self.cells, "pictures": self.pictures}
        nav = " · ".join(f'<a href="#{file_id(name)}">{attribute(name)}</a>' for name in order)
        title = f"locklab report: {self.view.run_id}" if self.view.run_id else "locklab report"
        return "\n".join([
            "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{attribute(title)}</title>", f"<style>{style()}</style>", "</head>", "<body>",
            f'<nav class="files">{nav}</nav>', "<main>", *sections, "</main>",
            '<aside id="panel" hidden><button id="panel-close" type="button" aria-label="close">×</button>'
            '<div id="panel-body"></div></aside>',
            f'<script type="application/json" id="lab-data">{json_for_script(data)}</script>',
            f"<script>{SCRIPT}</script>", "</body>", "</html>", ""])


def file_id(name: str) -> str:
    return "file-" + name.removesuffix(".md")


def picture_id(name: str) -> str:
    return "picture-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name.removesuffix(".png"))


def json_for_script(data: dict) -> str:
    """JSON that cannot end its <script> element early: every '<' written as \\u003c; keys sorted, so stable."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render_html(files: dict[str, str], view: RunView, picture_bytes: Callable[[str], bytes | None]) -> str:
    """The page's text. files: REPORT.md and its appendices, as the report renders them; picture_bytes(name):
    the PNG a file links (drawn beside REPORT.md), or None when it was not drawn."""
    return Page(view, picture_bytes).render(files)


def style() -> str:
    """The page's CSS; a cell's colour is its mark's in the matrix chart (lab/report/charts.py), so the page
    reads like matrix.png."""
    from lab.report.charts import MARK_COLOURS, OTHER_COLOUR

    marks = "\n".join(f"td.mark-{name} {{ border-left-color: {colour}; "
                       f"background: color-mix(in srgb, {colour} 14%, white); }}"
                       for name, (colour, _) in MARK_COLOURS.items())
    colours = {"other": OTHER_COLOUR, "failed": MARK_COLOURS["FAILED"][0], "kept": MARK_COLOURS["KEPT"][0]}
    return STYLE.substitute(colours) + marks + "\n"


STYLE = string.Template("""
body { font: 15px/1.5 system-ui, sans-serif; margin: 0; color: #212121; background: #fff; }
main { max-width: 1200px; margin: 0 auto; padding: 0 1.5em 4em; }
nav.files { position: sticky; top: 0; background: #fafafa; border-bottom: 1px solid #e0e0e0; padding: .4em 1.5em;
  z-index: 2; font-size: 14px; }
section { border-bottom: 2px solid #e0e0e0; padding-bottom: 1em; }
h1, h2, h3 { line-height: 1.25; } h2 { margin-top: 1.8em; }
code { font: 13px ui-monospace, monospace; background: #f5f5f5; padding: 0 .2em; border-radius: 3px; }
pre { background: #f5f5f5; padding: .6em; overflow-x: auto; } pre code { padding: 0; }
table { border-collapse: collapse; margin: .8em 0; font-size: 13px; }
th, td { border: 1px solid #e0e0e0; padding: .25em .45em; vertical-align: top; text-align: left; }
thead th { background: #f5f5f5; }
img { max-width: 100%; height: auto; }
.scroll { overflow: auto; max-height: 85vh; border: 1px solid #e0e0e0; }
table.matrix { margin: 0; font-size: 12px; }
table.matrix thead th { position: sticky; top: 0; z-index: 1; min-width: 7em; }
table.matrix tbody th { position: sticky; left: 0; background: #fff; white-space: nowrap; z-index: 1; }
td.cell { cursor: pointer; min-width: 7em; border-left: 4px solid $other; background: #fafafa; }
td.cell:hover, td.cell:focus, td.cell.open { outline: 2px solid #1565c0; outline-offset: -2px; }
.filters { margin: .6em 0; display: flex; flex-wrap: wrap; gap: .4em 1.2em; align-items: center; font-size: 14px; }
.filters .hint { color: #616161; font-size: 13px; }
.fit { display: none; color: $kept; margin-left: .3em; }
body.need-chosen tr[data-qualifies="yes"] .fit { display: inline; }
#panel { position: fixed; top: 0; right: 0; bottom: 0; width: min(760px, 94vw); overflow: auto; background: #fff;
  border-left: 1px solid #bdbdbd; box-shadow: -4px 0 16px #0002; padding: 1em 1.2em 3em; z-index: 3; }
#panel-close { position: sticky; top: 0; float: right; font-size: 22px; border: 0; background: #fff; cursor: pointer; }
#panel h2 { margin-top: 0; } #panel details { border-top: 1px solid #e0e0e0; padding: .4em 0; }
#panel summary { cursor: pointer; font-weight: 600; }
#panel table { font-size: 12px; } #panel td.value { font-family: ui-monospace, monospace; word-break: break-word; }
#panel tr.proof td { background: #fff3e0; }
#panel .picture img { border: 1px solid #e0e0e0; }
.verdict-unsafe, .missing { color: $failed; } .verdict-safe { color: $kept; }
""")

# Everything the panel shows is set as text (never parsed as HTML): a trial's words cannot inject markup.
SCRIPT = r"""
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("lab-data").textContent);
  const panel = document.getElementById("panel"), body = document.getElementById("panel-body");
  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) { if (v !== null && v !== undefined) node.setAttribute(k, v); }
    for (const child of [].concat(children === undefined ? [] : children)) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  function words(value) {
    if (value === null || value === undefined) return "";
    if (typeof value !== "object") return String(value);
    if (Array.isArray(value)) return value.map(words).join(", ");
    return Object.entries(value)
      .map(([k, v]) => k + "=" + (typeof v === "object" && v !== null ? JSON.stringify(v) : v)).join(", ");
  }
  function pairs(object) {
    return el("table", {class: "pairs"}, [el("tbody", {}, Object.entries(object).map(([k, v]) =>
      el("tr", {}, [el("th", {}, k), el("td", {class: "value"}, words(v))])))]);
  }
  function pictureSrc(name) {
    if (data.pictures[name]) return data.pictures[name];
    const shown = Array.from(document.querySelectorAll("img[data-picture]")).find(img => img.dataset.picture === name);
    return shown ? shown.getAttribute("src") : null;
  }
  function historyTable(trial) {
    const proof = new Map();
    for (const f of (trial.judgement && trial.judgement.findings) || []) {
      for (const i of f.proof || []) proof.set(i, (proof.has(i) ? proof.get(i) + ", " : "") + f.checker);
    }
    const rows = trial.history.map((op, i) => el("tr",
      proof.has(i) ? {class: "proof", title: "cited by " + proof.get(i)} : {},
      [el("td", {}, String(i)), el("td", {}, op[0].toFixed(4)), el("td", {}, op[1]), el("td", {}, op[2]),
       el("td", {}, op[3]), el("td", {class: "value"}, words(op[4]))]));
    return el("table", {class: "history", "data-trial": trial.id}, [
      el("thead", {}, [el("tr", {}, ["#", "time (s)", "process", "type", "f", "value"].map(h => el("th", {}, h)))]),
      el("tbody", {}, rows)]);
  }
  function trialSection(trial, open) {
    const head = [trial.id + ": ", el("span", {class: trial.safety ? "verdict-" + trial.safety : null},
      trial.status === "ok" ? (trial.verdict || "") : trial.status + (trial.reason ? ": " + trial.reason : ""))];
    const parts = [el("summary", {}, head)];
    const facts = {status: trial.status, run: trial.run};
    if (trial.safety) facts.safety = trial.safety;
    if (trial.exercised !== null && trial.exercised !== undefined) facts.exercised = trial.exercised;
    if (trial.reason) facts.reason = trial.reason;
    parts.push(pairs(facts));
    parts.push(el("h4", {}, "Evidence that the fault struck"));
    parts.push(trial.evidence ? pairs(trial.evidence) : el("p", {}, "none recorded in this trial's measures"));
    if (trial.judgement) {
      const j = trial.judgement;
      parts.push(el("h4", {}, "Judgement"));
      parts.push(pairs({kind: j.kind, safety: j.safety, lock: j.lock, exercised: j.exercised, figures: j.figures}));
      parts.push(el("table", {class: "findings"}, [
        el("thead", {}, [el("tr", {}, ["checker", "valid", "kind", "detail", "proof (history rows)"]
          .map(h => el("th", {}, h)))]),
        el("tbody", {}, (j.findings || []).map(f => el("tr", {}, [el("td", {}, f.checker), el("td", {}, f.valid),
          el("td", {}, f.kind || ""), el("td", {}, f.detail || ""), el("td", {}, (f.proof || []).join(", "))])))]));
    }
    if (trial.history) {
      parts.push(el("h4", {}, "History (" + trial.history.length + " operations)"));
      parts.push(historyTable(trial));
    } else if (trial.status === "ok") {
      parts.push(el("p", {}, "No history recorded (a schema 1 trial, or one that measures cost)."));
    }
    return el("details", open ? {open: "", "data-trial": trial.id} : {"data-trial": trial.id}, parts);
  }
  let current = null;
  function show(td) {
    const cell = data.cells[Number(td.dataset.cell)];
    if (current) current.classList.remove("open");
    current = td; td.classList.add("open");
    const parts = [el("h2", {}, [cell.backend + " under " + cell.label]), el("p", {class: "mark"}, cell.text)];
    const src = cell.picture ? pictureSrc(cell.picture) : null;
    if (src) {
      parts.push(el("div", {class: "picture"}, [
        el("p", {}, "Timeline of " + cell.pictured + (cell.mark === "FAILED" ? ", the cell's first failing trial" :
          ", the cell's first trial with a history") + "; every trial's history is in its table below."),
        el("img", {src: src, alt: "timeline of " + cell.pictured, "data-trial": cell.pictured})]));
    }
    if (!cell.trials.length) parts.push(el("p", {}, "No trial of this backend ran under this fault."));
    const opened = cell.pictured || (cell.trials[0] && cell.trials[0].id);
    for (const trial of cell.trials) parts.push(trialSection(trial, trial.id === opened));
    body.replaceChildren(...parts);
    panel.hidden = false;
    panel.scrollTop = 0;
  }
  function hide() { panel.hidden = true; if (current) { current.classList.remove("open"); current.focus(); } }
  document.addEventListener("click", event => {
    const td = event.target.closest("td[data-cell]");
    if (td) show(td);
  });
  document.addEventListener("keydown", event => {
    if (event.key === "Escape" && !panel.hidden) { hide(); return; }
    const td = event.target.closest && event.target.closest("td[data-cell]");
    if (td && (event.key === "Enter" || event.key === " ")) { event.preventDefault(); show(td); }
  });
  document.getElementById("panel-close").addEventListener("click", hide);
  const family = document.getElementById("filter-family"), need = document.getElementById("filter-need");
  const count = document.getElementById("filter-count");
  function filter() {
    const rows = Array.from(document.querySelectorAll("table.matrix tbody tr"));
    let shown = 0;
    for (const row of rows) {
      const keep = (!family.value || row.dataset.families.split(" ").includes(family.value)) &&
                   (!need.value || row.dataset.needs.split(" ").includes(need.value));
      row.hidden = !keep;
      shown += keep ? 1 : 0;
    }
    document.body.classList.toggle("need-chosen", Boolean(need.value));
    count.textContent = shown + " of " + rows.length + " backends shown";
  }
  if (family && need) { family.addEventListener("change", filter); need.addEventListener("change", filter); filter(); }
})();
"""
