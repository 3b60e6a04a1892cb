"""report.html in a real browser: Debian's chromium, driven by Playwright, opens the page from disk (file://).

No server and no network: the page must load with no console error and no request but its own file, show one
clickable cell per matrix cell, open a failing cell's panel with that trial's timeline and history, and hide
the rows a filter leaves out. Playwright's own browser download is never used (it cannot be fetched here):
the test launches /usr/bin/chromium, from .ci/os-packages. Each run leaves its screenshot in screenshots/
(not committed), a copy of the one in its tmp folder.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lab.report import run_view, write_report
from lab.report.decide import NEEDS, can_serve, standing
from lab.report.html import PAGE, families_of
from lab.report.matrix import columns_run, family_tables_of
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


@pytest.fixture
def opened(browser, report):
    _, path = report
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    seen = Opened(page, path.as_uri())
    page.on("console", lambda message: seen.errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: seen.errors.append(str(error)))
    page.on("requestfailed", lambda request: seen.failed.append(request.url))
    page.on("request", lambda request: seen.requests.append(request.url))
    page.goto(seen.url, wait_until="load")
    yield seen
    page.close()


def cells_of(folder):
    return [c for table in family_tables_of(run_view([folder])) for c in table.cells]


def visible_rows(page) -> list[str]:
    return page.eval_on_selector_all("table.matrix tbody tr", "rows => rows.filter(r => !r.hidden)"
                                                              ".map(r => r.dataset.backend)")


def test_the_page_loads_from_disk_with_no_error_and_no_request_but_its_own_file(opened):
    assert opened.errors == [] and opened.failed == []
    assert [url for url in opened.requests if not url.startswith("data:")] == [opened.url]
    assert opened.page.title().startswith("locklab report")


def test_the_dom_has_one_clickable_cell_per_matrix_cell(opened, report):
    folder, _ = report
    cells = cells_of(folder)
    assert opened.page.locator("table.matrix td[data-cell][role=button]").count() == len(cells) > 0
    marks = opened.page.eval_on_selector_all("td[data-cell]", "tds => tds.map(td => td.dataset.mark)")
    assert marks == [c.cell.mark.name for c in cells]


def test_a_click_on_a_failed_cell_shows_that_trials_timeline_and_history(opened, report, tmp_path):
    folder, _ = report
    page = opened.page
    cell = page.locator('td[data-mark="FAILED"][data-backend="session"][data-scenario="pause"]')
    pictured = page.evaluate("i => JSON.parse(document.getElementById('lab-data').textContent).cells[i].pictured",
                             int(cell.get_attribute("data-cell")))
    history = next(r for r in folder.trials() if r["id"] == pictured)["history"]
    assert page.locator("#panel").is_hidden()
    cell.click()
    panel = page.locator("#panel")
    assert panel.is_visible() and "session under holder paused past the TTL" in panel.locator("h2").inner_text()
    picture = panel.locator(f'img[data-trial="{pictured}"]')
    assert picture.is_visible()
    assert picture.evaluate("img => img.complete && img.naturalWidth > 0 && img.src.startsWith('data:image/png')")
    table = panel.locator(f'table.history[data-trial="{pictured}"]')
    assert table.is_visible() and table.locator("tbody tr").count() == len(history)
    assert table.locator("tr.proof").count() > 0  # the operations the checkers cite are marked
    assert "stale write accepted" in panel.locator(f'details[data-trial="{pictured}"] summary').inner_text()
    page.screenshot(path=tmp_path / "report.png")
    SCREENSHOTS.mkdir(exist_ok=True)
    shutil.copyfile(tmp_path / "report.png", SCREENSHOTS / "report.png")
    page.keyboard.press("Escape")
    assert panel.is_hidden()
    assert opened.errors == [] and opened.failed == []


def test_filters_hide_the_rows_outside_a_family_or_a_need(opened, report):
    folder, _ = report
    meta, page = folder.meta(), opened.page
    backends = [backend for table in family_tables_of(run_view([folder])) for backend, _ in table.rows]
    assert visible_rows(page) == backends
    page.select_option("#filter-family", "library")
    assert visible_rows(page) == [b for b in backends if "library" in families_of(meta, b)] == ["tooz_pgsql"]
    page.select_option("#filter-family", "run_level")
    assert visible_rows(page) == [b for b in backends if "run_level" in families_of(meta, b)]
    assert page.locator("#filter-count").inner_text() == f"{len(visible_rows(page))} of {len(backends)} backends shown"
    page.select_option("#filter-family", "")
    page.select_option("#filter-need", "0")
    serving = [b for b in backends if can_serve(NEEDS[0], meta, b)]
    assert visible_rows(page) == serving and 0 < len(serving) < len(backends)
    view = run_view([folder])
    starred = page.eval_on_selector_all("table.matrix tbody tr:not([hidden]) .fit",
                                        "marks => marks.filter(m => m.offsetParent !== null)"
                                        ".map(m => m.closest('tr').dataset.backend)")
    assert starred == [b for b in serving if standing(view.frame, b, columns_run(view)).qualifies]
    page.select_option("#filter-need", "")
    assert visible_rows(page) == backends
    assert opened.errors == []
