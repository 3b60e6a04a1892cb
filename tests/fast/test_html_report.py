"""report.html (lab/report/html.py) and its Markdown converter (lab/report/markdown_html.py), without a browser:
the subset the report writes, a page that fetches nothing, one clickable cell per matrix cell, the same bytes
on every render, and a page replaced whole or not at all. tests/browser/ drives the same page in Chromium."""

from __future__ import annotations

import copy
import json
import html
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from lab.report import run_view, write_report
from lab.report.fault_groups import summary_tables
from lab.report.html import CELLS_PER_BLOCK, PAGE, families_of, json_for_script, unpacked
from lab.report.markdown_html import to_html
from lab.report.matrix import IDLE_MARKS, matrix_rows
from lab.report.matrix_split import split_tables
from lab.records.results import RunFolder
from tests.fast.planted import saved_run

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "results" / "20261201-182949-85a8"  # the committed reference run (docs/report.md)
BACKENDS = ("none", "session", "xact", "redis_fenced", "tooz_pgsql")
SCENARIOS = ("cases", "calibrate", "overlap", "kill", "pause")


def small_run(root: Path) -> RunFolder:
    """Five backends under five of the reference run's scenarios, as a run of their own; its meta.json declares
    the adapter's library as a run of this commit does (the reference predates that declaration)."""
    source = RunFolder(REFERENCE)
    meta = copy.deepcopy(source.meta())
    meta["backends"] = meta["backend_order"] = [b for b in meta["backend_order"] if b in BACKENDS]
    meta["scenarios"] = meta["scenario_order"] = [s for s in meta["scenario_order"] if s in SCENARIOS]
    meta["libraries"] = {b: "tooz" if b == "tooz_pgsql" else None for b in BACKENDS}
    return saved_run(root / "small-run", meta, (record for record in source.trials()
                                                if record["backend"] in BACKENDS and record["scenario"] in SCENARIOS))


class Elements(HTMLParser):
    """Every start tag of a page with its attributes, in order."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def all(self, tag: str, **wanted) -> list[dict]:
        return [a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in wanted.items())]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """(run folder, REPORT.md's folder, report.html's text) for the small run, rendered once."""
    root = tmp_path_factory.mktemp("html")
    folder = small_run(root / "results")
    out = write_report(folder, root / "out" / "REPORT.md", html=True)
    return folder, out.parent, (out.parent / PAGE).read_text()


def data_of(page: str) -> dict:
    """The page's data: each cell's, in index order (from its block of CELLS_PER_BLOCK), and each picture's PNG block."""
    blocks = re.findall(r'<script type="text/plain" id="cells-(\d+)">(.*?)</script>', page, re.S)
    assert [int(i) for i, _ in blocks] == list(range(len(blocks)))
    cells = [cell for _, blob in blocks for cell in unpacked(blob)]
    assert all(len(unpacked(blob)) == CELLS_PER_BLOCK for _, blob in blocks[:-1])  # the last block holds the rest
    pngs = dict(re.findall(r'<script type="text/plain" id="(png-\d+)">(.*?)</script>', page, re.S))
    return {"cells": cells, "pngs": pngs}


# The converter, on the Markdown subset the report writes.
def test_the_converter_renders_the_reports_markdown_subset():
    text = "\n".join([
        "# Title", "", "A paragraph with `code <b>`, *emphasis*, **bold** and a [link](REPORT-outcomes.md);",
        "its second line, and ![a chart](matrix.png).", "",
        "- one item with `x`", "  continued", "- **two**", "",
        "| backend | cell |", "|---|---|", "| `a\\|b` | ✗ *lost* 1/1 |", "| c |  |", "",
        "```", "run 0: <raw> *not emphasis*", "```", "", "## Title", ""])
    html = to_html(text)
    assert '<h1 id="title">Title</h1>' in html and '<h2 id="title-2">Title</h2>' in html  # ids unique
    assert ("<p>A paragraph with <code>code &lt;b&gt;</code>, <em>emphasis</em>, <strong>bold</strong> and a "
            '<a href="REPORT-outcomes.md">link</a>;\nits second line, and <img src="matrix.png" alt="a chart">.</p>'
            in html)
    assert "<ul>\n<li>one item with <code>x</code>\ncontinued</li>\n<li><strong>two</strong></li>\n</ul>" in html
    assert "<thead><tr><th>backend</th><th>cell</th></tr></thead>" in html
    assert "<tr><td><code>a|b</code></td><td>✗ <em>lost</em> 1/1</td></tr>" in html  # \\| is a pipe in the cell
    assert "<tr><td>c</td><td></td></tr>" in html
    assert "<pre><code>run 0: &lt;raw&gt; *not emphasis*</code></pre>" in html


def test_the_converter_escapes_what_is_not_in_the_subset_and_leaves_lone_asterisks():
    html = to_html("Lock(<key>) <script>x</script> & 2 * 3 * 4, snake*case*word, \\*literal\\*\n")
    assert html == ("<p>Lock(&lt;key&gt;) &lt;script&gt;x&lt;/script&gt; &amp; 2 * 3 * 4, snake*case*word, "
                    "*literal*</p>\n")


def test_the_converters_hooks_place_pictures_links_and_a_table_of_their_own():
    html = to_html("![m](matrix.png) [gone](elsewhere.md) [kept](REPORT.md)\n\n| a |\n|---|\n| 1 |\n",
                   image=lambda src, alt: f'<img src="data:{src}">', link=lambda href: None if "gone" in href
                   or href == "elsewhere.md" else "#" + href, table=lambda headers, rows: f"<table>{rows}</table>")
    assert '<img src="data:matrix.png"> gone <a href="#REPORT.md">kept</a>' in html
    assert "<table>[['1']]</table>" in html


def test_the_converter_leaves_no_markdown_behind_in_the_committed_report():
    """Every heading and table of the committed report becomes HTML; no asterisk or backtick of markup is left."""
    for name in ("REPORT.md", "REPORT-outcomes.md", "REPORT-timelines.md"):
        text = (ROOT / name).read_text()
        html = to_html(text)
        assert html.count("<table>") == len(re.findall(r"^\|.*\n\|---", text, re.M)), name
        assert len(re.findall(r"<h[1-3] ", html)) == len(re.findall(r"^#{1,3} ", text, re.M)), name
        outside_code = re.sub(r"<(code|pre)>.*?</\1>", "", html, flags=re.S)
        assert "*" not in outside_code and "`" not in outside_code, name


# The page.
def test_the_page_fetches_nothing(rendered):
    """No http(s) address and nothing relative: every src and href is a data: URI or a place in the page; a
    picture's PNG waits in a block of its own until it is shown."""
    _, _, page = rendered
    elements = Elements(page)
    ids = {a["id"] for _, a in elements.tags if "id" in a}
    assert not elements.all("link") and not [a for a in elements.all("script") if "src" in a]
    assert not elements.all("iframe") and not elements.all("object") and "@import" not in page
    for tag, attrs in elements.tags:
        for name in ("src", "href", "srcset", "poster", "action"):
            value = attrs.get(name)
            if value is None:
                continue
            assert not re.match(r"(?i)\s*(https?:)?//", value), (tag, value)
            assert value.startswith("data:image/png;base64,") or value[1:] in ids and value.startswith("#"), \
                (tag, value[:80])
    assert re.search(r"url\(\s*['\"]?(https?:)?//", page) is None
    pngs = data_of(page)["pngs"]  # the small run's one chart is the matrix, which the page shows as its grid
    assert all(uri.startswith("data:image/png;base64,") for uri in pngs.values())
    assert sorted(a["data-png"] for a in elements.all("img") if "data-png" in a) == sorted(pngs)


def test_the_summary_comes_first_and_each_family_holds_its_faults_cells(rendered):
    """The page opens on the summary matrix: a column per family (its worst mark with counts), followed by a
    hidden column per fault of that family, every fault cell a button naming its data."""
    folder, _, page = rendered
    view = run_view([folder])
    assert page.index('<section id="tool">') < page.index('data-file="REPORT.md"')
    (table,) = summary_tables(view)
    summary = table.summary
    elements = Elements(page)
    family_cells = [a for a in elements.all("td") if "family-cell" in a.get("class", "")]
    assert [(a["data-backend"], a["data-family"], a["data-worst"]) for a in family_cells] == [
        (backend, c.family.value, c.worst.name) for backend, cells in summary.rows for c in cells]
    folded = [a for a in elements.all("td") if "fault" in a.get("class", "").split()]
    assert all("hidden" in a and a["role"] == "button" for a in folded)
    assert [(a["data-backend"], a["data-scenario"], a["data-variant"], a["data-mark"]) for a in folded] == [
        (m.backend, m.scenario, m.variant, m.cell.mark.name) for _, cells in summary.rows for c in cells
        for m in c.cells]


def test_every_appendix_cell_is_one_clickable_cell_carrying_its_data(rendered):
    folder, _, page = rendered
    view = run_view([folder])
    split = [c for part in split_tables(view) for t in part.tables for c in t.table.cells]
    clickable = [a for a in Elements(page).all("td", role="button") if "fault" not in a.get("class", "").split()]
    assert len(clickable) == len(split) > 0
    for td, c in zip(clickable, split):
        assert (td["data-backend"], td["data-scenario"], td["data-variant"], td["data-mark"]) == \
               (c.backend, c.scenario, c.variant, c.cell.mark.name)
    assert {"FAILED", "KEPT", "LOST"} <= {td["data-mark"] for td in clickable}
    # One block of data per cell, however many grids show it, and each names the cell it belongs to.
    data = data_of(page)["cells"]
    every = Elements(page).all("td", role="button")
    assert sorted({int(td["data-cell"]) for td in every}) == list(range(len(data)))
    for td in every:
        cell = data[int(td["data-cell"])]
        assert (cell["backend"], cell["scenario"], cell["variant"], cell["mark"]) == \
               (td["data-backend"], td["data-scenario"], td["data-variant"], td["data-mark"])
    # A family's table leaves out only the columns and rows where none of its cells ran.
    shown = {(c.backend, c.scenario, c.variant) for c in split}
    every_cell = [c for _, row in matrix_rows(view) for c in row]
    assert all(c.cell.mark in IDLE_MARKS for c in every_cell if (c.backend, c.scenario, c.variant) not in shown)


def test_a_cells_panel_data_has_each_trials_verdict_evidence_judgement_history_and_timeline(rendered):
    folder, _, page = rendered
    data = data_of(page)["cells"]
    failed = [c for c in data if c["mark"] == "FAILED" and c["scenario"] == "pause"]
    assert failed
    for cell in failed:
        trials = {t["id"]: t for t in cell["trials"]}
        trial = trials[cell["pictured"]]
        assert trial["safety"] == "unsafe" and trial["evidence"]["fault"] == "pause"
        assert trial["judgement"]["kind"] == trial["verdict"] and trial["judgement"]["findings"]
        record = next(r for r in folder.trials() if r["id"] == trial["id"])
        assert [op[:4] for op in trial["history"]] == [[round(o["time"], 4), o["process"], o["type"], o["f"]]
                                                        for o in record["history"]]
        line = trial["timeline"]  # drawn by the page from bars_of's intervals, as the PNG is
        assert line["lanes"][:2] == ["holder", "contender"] and line["bars"] and line["windows"]
        assert {what for _, what, *_ in line["bars"]} >= {"right", "acquire", "write"}
        assert all("timeline" not in t for t in cell["trials"] if t["id"] != cell["pictured"])
    # A cell with no history (n/a) has no timeline, and its trials say why they did not run.
    for na in [c for c in data if c["mark"] == "NOT_APPLICABLE"]:
        assert "pictured" not in na and all(t["status"] == "skipped" and t["reason"] for t in na["trials"])


def test_the_timeline_appendix_is_drawn_from_the_trials_data_not_stored_as_pictures(rendered):
    """Each failure's timeline of REPORT-timelines.md is a figure the page draws from that trial's data; no
    timeline PNG is in the page."""
    folder, out, page = rendered
    data = data_of(page)["cells"]
    figures = [a for a in Elements(page).all("figure") if "data-timeline-cell" in a]
    gallery = re.findall(r"!\[([^\]]+)\]\((timelines/[^)]+)\)", (out / "REPORT-timelines.md").read_text())
    assert len(figures) == len(gallery) > 0
    for figure, (trial_id, _) in zip(figures, gallery):
        assert figure["data-trial"] == trial_id
        trial = next(t for t in data[int(figure["data-timeline-cell"])]["trials"] if t["id"] == trial_id)
        assert trial["timeline"]["bars"]
    assert not [a for a in Elements(page).all("img") if a.get("data-picture", "").startswith("timelines/")]


class Headings(HTMLParser):
    """The text of every h1 to h3 of a page, in order."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.inside = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag in ("h1", "h2", "h3"):
            self.inside = True
            self.found.append("")

    def handle_endtag(self, tag):
        self.inside = self.inside and tag not in ("h1", "h2", "h3")

    def handle_data(self, data):
        if self.inside:
            self.found[-1] += data


def test_the_page_holds_the_same_content_as_the_report_and_its_appendices(rendered):
    """REPORT.md first, then each appendix in the order it links them: every heading in order, every matrix
    cell's words."""
    folder, out, page = rendered
    order = re.findall(r'<section id="[^"]+" data-file="([^"]+)">', page)
    linked = re.findall(r"^- \[.*\]\((REPORT-[a-z]+\.md)\)$", (out / "REPORT.md").read_text(), re.M)
    assert order == ["REPORT.md", *linked]
    assert len(order) == 1 + len(linked) >= 3
    headings = [re.sub(r"[`*]", "", h) for name in order
                for h in re.findall(r"^#{1,3} (.+)$", (out / name).read_text(), re.M)]
    assert Headings(page).found == ["locklab report: small-run", *headings]  # the summary's, then the files' 
    for _, row in matrix_rows(run_view([folder])):
        for c in row:
            assert re.sub(r"[`*]", "", c.cell.text) in page
    links = Elements(page).all("a")
    assert {"href": "#file-REPORT-timelines"} in links  # REPORT.md's link to its appendix, now within the page


def test_the_same_runs_give_the_same_bytes_from_lab_report_html(rendered, tmp_path, capsys):
    """`lab report RUN --html` writes the page beside REPORT.md, byte for byte the page of the same run."""
    from lab.cli import main

    folder, _, page = rendered
    assert main(["report", str(folder.path), "--output", str(tmp_path / "REPORT.md"), "--html"]) == 0
    assert (tmp_path / PAGE).read_text() == page and (tmp_path / "REPORT.md").is_file()
    assert f"and {tmp_path / PAGE}" in capsys.readouterr().out
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]


def test_a_page_that_fails_to_render_leaves_the_report_and_page_as_they_were(rendered, tmp_path, monkeypatch):
    folder, out, _ = rendered
    shutil.copytree(out, tmp_path / "out")
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir() if p.is_file()}

    def broken(*args, **kwargs):
        raise RuntimeError("planted")

    monkeypatch.setattr("lab.report.html.render_html", broken)
    with pytest.raises(RuntimeError, match="planted"):
        write_report(folder, tmp_path / "out" / "REPORT.md", html=True)
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir() if p.is_file()} == before
    assert not [p for p in (tmp_path / "out").rglob("*") if ".tmp" in p.name]


def test_families_come_from_declarations_never_from_names():
    """A backend the lab has never heard of lands in the families its declarations put it in."""
    meta = {"capabilities": {"my_lock": ["exclusion", "session_lock"], "my_lease": ["exclusion", "fencing",
                                                                                   "lease_expiry"],
                             "my_write": []},
            "lock_service": {"my_lock": "postgres", "my_lease": "redis", "my_write": "postgres"},
            "libraries": {"my_lease": "some-lock-library"}}
    assert families_of(meta, "my_lock") == ["run_level"]
    assert families_of(meta, "my_lock@asyncpg") == ["run_level"]  # a driver row is declared as its backend
    assert families_of(meta, "my_lease") == ["lease", "fenced", "library"]
    assert families_of(meta, "my_write") == ["no_lock"]
    assert families_of(meta, "undeclared") == []  # a run that declared nothing of it: no family claimed


def test_rows_carry_their_families_and_needs_from_the_runs_declarations(rendered):
    from lab.report.decide import NEEDS, can_serve

    folder, _, page = rendered
    meta = folder.meta()
    rows = {a["data-backend"]: a for a in Elements(page).all("tr") if "data-families" in a}
    assert sorted(rows) == sorted(BACKENDS)  # each in its family's table
    assert rows["tooz_pgsql"]["data-families"] == "run_level library"
    assert rows["xact"]["data-families"] == "in_write" and rows["none"]["data-families"] == "no_lock"
    for backend, row in rows.items():
        assert row["data-needs"].split() == [str(i) for i, n in enumerate(NEEDS) if can_serve(n, meta, backend)]


def test_json_in_the_page_cannot_close_its_script_element():
    text = json_for_script({"reason": "</script><script>alert(1)</script>", "line": "a\u2028b"})
    assert "</" not in text and "\u2028" not in text
    assert json.loads(text) == {"reason": "</script><script>alert(1)</script>", "line": "a\u2028b"}


def test_the_page_opens_on_every_named_stacks_answer_computed_by_the_advice(rendered):
    """The answer at the top of the page is what lab/report/advice.py advise() computes for each stack the page
    names (every stack's shown, the others hidden until chosen): for each need the first qualifier and the next ones
    in order, or the decision's sentence where none qualifies. The page carries no decision of its own: no script
    but the grid's and the choice's, and no stack data."""
    from lab.report.advice import advise
    from lab.stack.choices import EVERY_STACK, PANEL_STACKS, stack_of, to_query

    folder, _, page = rendered
    view = run_view([folder])
    assert 'id="stack-data"' not in page and "html_stack" not in page
    sections = re.findall(r'<section class="answer" data-stack="([^"]*)"( hidden)?>(.*?)</section>', page, re.S)
    named = (EVERY_STACK, *PANEL_STACKS)
    assert [html.unescape(q) for q, _, _ in sections] == [to_query(s.services, s.values) for s in named]
    assert [bool(h) for _, h, _ in sections] == [False] + [True] * len(PANEL_STACKS)  # every stack's first
    assert page.index('id="answer"') < page.index('<table class="matrix summary"')  # the answer before the grid
    for (_, _, body), stack in zip(sections, named):
        advice = advise(view, stack_of(stack.services, stack.values))
        rows = re.findall(r'<tr><th scope="row">(.*?)</tr>', body, re.S)
        assert len(rows) == len(advice.needs)
        for row, need in zip(rows, advice.needs):
            if need.qualifying:
                (first,) = re.findall(r'data-lock="([^"]+)"', row)
                (then,) = re.findall(r'data-locks="([^"]*)"', row)
                assert [first, *then.split()] == [k.backend for k in need.qualifying[:3]]
            else:
                assert "no lock measured here qualifies" in row


