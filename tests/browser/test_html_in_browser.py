"""report.html in a real browser: Debian's chromium, driven by Playwright, opens the page from disk (file://).

No server and no network: the page must load with no console error and no request but its own file, open on the
summary matrix, keep that grid's header row and backend column in view however far it scrolls, open a family of
faults into its columns, open a fault's cell by mouse or keyboard (arrows move, Enter opens, Escape closes) with
the trial's timeline drawn and its history, draw the timeline appendix's pictures as they come into view, and
hide the rows a filter leaves out. Playwright's own browser download is never used (it cannot be fetched here):
the test launches /usr/bin/chromium, from .ci/os-packages. Each run leaves its screenshot in screenshots/
(not committed), a copy of the one in its tmp folder, and prints the page's size.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lab.report import run_view, write_report
from lab.report.decide import NEEDS, can_serve, qualifying
from lab.report.fault_groups import summary_tables
from lab.report.html import PAGE, families_of
from tests import os_packages
from tests.fast.test_html_report import small_run

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install -e '.[test]')")

pytestmark = pytest.mark.os_packages("chromium")
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """(run folder, report.html) of the small run of tests/fast/test_html_report.py."""
    root = tmp_path_factory.mktemp("browser")
    folder = small_run(root / "results")
    out = write_report(folder, root / "out" / "REPORT.md", html=True)
    return folder, out.parent / PAGE


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=os_packages.packages()["chromium"].binary,
                                              args=["--no-sandbox"])
        yield chromium
        chromium.close()


@dataclass
class Opened:
    page: object
    url: str
    errors: list[str] = field(default_factory=list)  # console errors and uncaught exceptions
    failed: list[str] = field(default_factory=list)  # requests that failed
    requests: list[str] = field(default_factory=list)


def open_page(browser, path: Path, width: int = 1400, height: int = 900) -> Opened:
    page = browser.new_page(viewport={"width": width, "height": height})
    seen = Opened(page, path.as_uri())
    page.on("console", lambda message: seen.errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: seen.errors.append(str(error)))
    page.on("requestfailed", lambda request: seen.failed.append(request.url))
    page.on("request", lambda request: seen.requests.append(request.url))
    page.goto(seen.url, wait_until="load")
    return seen


@pytest.fixture
def opened(browser, report):
    seen = open_page(browser, report[1])
    yield seen
    assert seen.errors == [] and seen.failed == []  # no test leaves a console error behind
    seen.page.close()


@pytest.fixture
def cramped(browser, report):
    """The page in a window too small for the summary: it scrolls both ways inside its grid."""
    seen = open_page(browser, report[1], width=640, height=330)
    yield seen
    assert seen.errors == [] and seen.failed == []
    seen.page.close()


def summary_rows(folder) -> list[str]:
    return [backend for table in summary_tables(run_view([folder])) for backend, _ in table.summary.rows]


def visible_rows(page) -> list[str]:
    return page.eval_on_selector_all("table.summary tbody tr", "rows => rows.filter(r => !r.hidden)"
                                                               ".map(r => r.dataset.backend)")


def test_the_page_loads_from_disk_with_no_error_and_no_request_but_its_own_file(opened, report, capsys):
    assert opened.errors == [] and opened.failed == []
    assert [url for url in opened.requests if not url.startswith("data:")] == [opened.url]
    assert opened.page.title().startswith("locklab report")
    with capsys.disabled():
        print(f"\nreport.html of the small run: {report[1].stat().st_size:,} bytes")


def test_the_page_opens_on_the_answer_then_the_summary_matrix(opened, report):
    folder, _ = report
    page = opened.page
    answer, grid = page.locator("#answer"), page.locator("#tool table.summary")
    assert answer.is_visible() and grid.is_visible()
    assert answer.bounding_box()["y"] < 150 < grid.bounding_box()["y"] < 900  # both in the first screen, answer first
    assert visible_rows(page) == summary_rows(folder)
    assert page.locator("table.summary td.fault").first.is_hidden()  # the faults wait inside their families


def edges(page) -> dict:
    """Where the grid's scroll box, its corner, its last header cell and its last row's backend cell are, and
    what the browser shows at each cell's middle."""
    return page.evaluate("""() => {
      const box = document.querySelector('.summary-scroll');
      const heads = Array.from(box.querySelectorAll('thead th')).filter(th => !th.hidden);
      const rows = Array.from(box.querySelectorAll('tbody tr')).filter(tr => !tr.hidden);
      const at = node => { const r = node.getBoundingClientRect();
        const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
        return {top: r.top, left: r.left, shown: node === hit || node.contains(hit)}; };
      const r = box.getBoundingClientRect();
      return {box: {top: r.top + box.clientTop, left: r.left + box.clientLeft},
              scrolled: {left: box.scrollLeft, top: box.scrollTop},
              room: {left: box.scrollWidth - box.clientWidth, top: box.scrollHeight - box.clientHeight},
              corner: at(heads[0]), lastHead: at(heads[heads.length - 1]), lastRow: at(rows[rows.length - 1].cells[0])};
    }""")


def test_the_header_row_and_the_backend_column_stay_in_view_when_the_grid_scrolls_right_and_down(cramped):
    page = cramped.page
    for button in page.locator("table.summary th.family button").all():  # every family open: a wide grid
        button.click()
    before = edges(page)
    assert before["room"]["left"] > 200 and before["room"]["top"] > 50  # it does overflow both ways
    page.eval_on_selector(".summary-scroll", "box => { box.scrollIntoView({block: 'end'}); "  # the whole box on screen
                                             "box.scrollLeft = box.scrollWidth; box.scrollTop = box.scrollHeight; }")
    after = edges(page)
    assert after["scrolled"]["left"] > 200 and after["scrolled"]["top"] > 50
    for cell in ("corner", "lastHead"):  # the header row: still at the top of the box, not covered
        assert abs(after[cell]["top"] - after["box"]["top"]) <= 1 and after[cell]["shown"], (cell, after)
    for cell in ("corner", "lastRow"):  # the backend column: still at its left
        assert abs(after[cell]["left"] - after["box"]["left"]) <= 1 and after[cell]["shown"], (cell, after)
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "scrolled.png")


def test_a_family_cell_opens_into_its_faults_and_closes_again(opened):
    page = opened.page
    family = page.locator('table.summary td.family-cell[data-family="pauses"]').first
    faults = page.locator('table.summary .fault[data-family="pauses"]')
    assert faults.count() > 0 and all(f.is_hidden() for f in faults.all())
    family.click()
    assert all(f.is_visible() for f in faults.all())
    assert page.locator('table.summary th.family button[data-family="pauses"]').get_attribute("aria-expanded") == "true"
    other = page.locator('table.summary .fault[data-family="idle_guards"]').first
    assert other.is_hidden()  # only the family clicked
    family.click()
    assert all(f.is_hidden() for f in faults.all())


def focused(page) -> dict:
    return page.evaluate("() => ({...document.activeElement.dataset, cls: document.activeElement.className})")


def test_a_cell_opens_by_keyboard_arrows_move_enter_opens_escape_closes(opened):
    page = opened.page
    page.locator("table.summary td[tabindex='0']").focus()  # the grid's one cell in the tab order
    start = focused(page)
    assert "family-cell" in start["cls"]
    page.keyboard.press("ArrowDown")
    below = focused(page)
    assert below["family"] == start["family"] and below["backend"] != start["backend"]
    page.keyboard.press("ArrowUp")
    assert focused(page)["backend"] == start["backend"]
    while focused(page)["family"] != "pauses":  # along the row to a family that fails somewhere
        page.keyboard.press("ArrowRight")
    for _ in range(len(visible_rows(page))):  # down to a backend whose pause failed
        if focused(page).get("worst") == "FAILED":
            break
        page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")  # the family opens; focus stays on its cell
    assert page.locator('table.summary .fault[data-family="pauses"]').first.is_visible()
    page.keyboard.press("ArrowRight")  # into the family's first fault
    cell = focused(page)
    assert "fault" in cell["cls"].split() and cell["family"] == "pauses"
    panel = page.locator("#panel")
    assert panel.is_hidden()
    page.keyboard.press("Enter")
    panel.locator("h2").wait_for()  # the cell's data is inflated when it is opened
    assert panel.is_visible() and panel.locator("h2").inner_text().startswith(cell["backend"] + " under ")
    assert panel.locator("svg.timeline").count() == 1  # drawn when opened, from that trial's history
    page.keyboard.press("Escape")
    assert panel.is_hidden() and focused(page)["cell"] == cell["cell"]  # back on the cell it opened
    page.keyboard.press("Escape")  # and the family folds, focus on its cell
    assert page.locator('table.summary .fault[data-family="pauses"]').first.is_hidden()
    assert "family-cell" in focused(page)["cls"]


def test_a_click_on_a_failed_cell_shows_that_trials_timeline_and_history(opened, report, tmp_path):
    folder, _ = report
    page = opened.page
    page.locator('table.summary th.family button[data-family="pauses"]').click()
    cell = page.locator('table.summary td[data-mark="FAILED"][data-backend="session"][data-scenario="pause"]')
    pictured = page.evaluate("i => window.locklabCell(i).then(cell => cell.pictured)",
                             int(cell.get_attribute("data-cell")))
    history = next(r for r in folder.trials() if r["id"] == pictured)["history"]
    assert page.locator("#panel").is_hidden()
    cell.click()
    panel = page.locator("#panel")
    panel.locator("h2").wait_for()
    assert panel.is_visible() and "session under holder paused past the TTL" in panel.locator("h2").inner_text()
    picture = panel.locator(f'svg.timeline[data-trial="{pictured}"]')
    assert picture.is_visible() and picture.locator("rect").count() > 5
    assert "holder" in picture.inner_html() and "contender" in picture.inner_html()
    table = panel.locator(f'table.history[data-trial="{pictured}"]')
    assert table.is_visible() and table.locator("tbody tr").count() == len(history)
    assert table.locator("tr.proof").count() > 0  # the operations the checkers cite are marked
    assert "stale write accepted" in panel.locator(f'details[data-trial="{pictured}"] summary').inner_text()
    page.screenshot(path=tmp_path / "report.png")
    SCREENSHOTS.mkdir(exist_ok=True)
    shutil.copyfile(tmp_path / "report.png", SCREENSHOTS / "report.png")
    page.keyboard.press("Escape")
    assert panel.is_hidden()


def test_every_cell_opens_its_own_data_from_the_block_that_holds_it(browser, tmp_path, monkeypatch):
    """The page keeps its cells' data CELLS_PER_BLOCK cells to a block: rendered here with blocks of 8, each cell still
    reads its own data (the grid's backend, scenario and variant), whichever block holds it, and opens on a click."""
    from lab.report import html_data

    monkeypatch.setattr(html_data, "CELLS_PER_BLOCK", 8)
    folder = small_run(tmp_path / "results")
    page_path = write_report(folder, tmp_path / "out" / "REPORT.md", html=True).parent / PAGE
    seen = open_page(browser, page_path)
    page = seen.page
    grid = page.evaluate("""() => Array.from(document.querySelectorAll('td[data-cell]'), td =>
      [Number(td.dataset.cell), td.dataset.backend, td.dataset.scenario, td.dataset.variant])""")
    cells = {index: place for index, *place in grid}
    assert len(cells) > 3 * 8 and page.locator('script[id^="cells-"]').count() == -(-len(cells) // 8)
    read = page.evaluate("n => Promise.all(Array.from({length: n}, (_, i) => window.locklabCell(i)"
                         ".then(c => [c.backend, c.scenario, c.variant])))", len(cells))
    assert read == [cells[i] for i in range(len(cells))]
    last = max(cells)  # a cell of the last block, opened by a click
    for button in page.locator("table.summary th.family button").all():  # every family open: its faults shown
        button.click()
    page.locator(f'td[data-cell="{last}"]').first.click()
    page.locator("#panel h2").wait_for()
    assert page.locator("#panel h2").inner_text().startswith(cells[last][0] + " under ")
    assert seen.errors == [] and seen.failed == []
    seen.page.close()


def test_the_timeline_appendix_draws_each_picture_when_it_comes_into_view(opened):
    page = opened.page
    figure = page.locator("figure.timeline[data-timeline-cell]").first
    assert figure.count() == 1 and figure.locator("svg").count() == 0  # nothing drawn before it is seen
    figure.scroll_into_view_if_needed()
    page.wait_for_function("f => f.querySelector('svg') !== null", arg=figure.element_handle())
    assert figure.locator("svg rect").count() > 3
    charts = page.locator("img[data-picture]")  # a chart's PNG, attached when it comes into view
    if charts.count():  # the small run draws no chart but the matrix, which the page shows as its grid
        chart = charts.first
        chart.scroll_into_view_if_needed()
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=chart.element_handle())


def test_filters_hide_the_rows_outside_a_family_or_a_need(opened, report):
    folder, _ = report
    meta, page = folder.meta(), opened.page
    backends = summary_rows(folder)
    assert visible_rows(page) == backends
    page.select_option("#filter-family", "library")
    assert visible_rows(page) == [b for b in backends if "library" in families_of(meta, b)] == ["tooz_pgsql"]
    page.select_option("#filter-family", "run_level")
    assert visible_rows(page) == [b for b in backends if "run_level" in families_of(meta, b)]
    assert page.locator("#filter-count").inner_text() == f"{len(visible_rows(page))} of {len(backends)} backends shown"
    page.select_option("#filter-family", "")
    chosen = next(i for i, n in enumerate(NEEDS) if 0 < sum(can_serve(n, meta, b) for b in backends) < len(backends))
    page.select_option("#filter-need", str(chosen))  # a need some backends of the run cannot serve
    serving = [b for b in backends if can_serve(NEEDS[chosen], meta, b)]
    assert visible_rows(page) == serving and 0 < len(serving) < len(backends)
    view = run_view([folder])
    starred = page.eval_on_selector_all("table.summary tbody tr:not([hidden]) .fit",
                                        "marks => marks.filter(m => m.offsetParent !== null)"
                                        ".map(m => m.closest('tr').dataset.backend)")
    assert starred == [b for b in serving if any(b in fit for fit in qualifying(view).values())]
    page.select_option("#filter-need", "")
    assert visible_rows(page) == backends
