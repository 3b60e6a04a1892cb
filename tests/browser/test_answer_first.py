"""report.html's first screen in Chromium at 1280 x 900: the answer for every stack, and after a stack is chosen,
the answer for that stack, both without scrolling; each the answer `lab doctor --advise` and `lab report --stack`
compute (lab/report/advice.py advise), which the page only shows.

The run: six of the reference run's scenarios (the idle guards, a pause, the pooler, the scripted failover, a lock
server restarted, Redis failed over) and the Patroni run's, for seven locks on PostgreSQL and one on Redis, merged
as `lab report RUN RUN` merges them. The page's address carries the stack; reloading it answers the same; a cell of
the answer opens its trials as the grid's cells do.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from lab.report import run_view, write_report
from lab.report.advice import advise
from lab.report.html import PAGE
from lab.records.results import RunFolder
from lab.stack.choices import EVERY_STACK, PANEL_STACKS, stack_of, to_query
from tests.browser.test_html_in_browser import SCREENSHOTS, browser, open_page  # noqa: F401 (a fixture)
from tests.fast.planted import saved_run
from tests.fast.test_html_report import REFERENCE

pytestmark = pytest.mark.os_packages("chromium")

PATRONI_RUN = REFERENCE.parent / "20261202-040926-a47d"  # the reference's Patroni scenario (REPORT.md, Provenance)
BACKENDS = ("none", "session", "session_autocommit", "xact", "serializable", "lease_row", "tooz_pgsql", "redis_fenced")
WIDTH, HEIGHT = 1280, 900  # the first screen the issue names


def subset(source: Path, root: Path, scenarios: tuple[str, ...]) -> RunFolder:
    """Some scenarios of a run, for BACKENDS, as a run of their own."""
    meta = copy.deepcopy(RunFolder(source).meta())
    meta["backends"] = meta["backend_order"] = [b for b in meta["backend_order"] if b in BACKENDS]
    meta["scenarios"] = meta["scenario_order"] = [s for s in meta["scenario_order"] if s in scenarios]
    return saved_run(root / source.name, meta, (record for record in RunFolder(source).trials()
                                                if record["backend"] in BACKENDS and record["scenario"] in scenarios))


@pytest.fixture(scope="module")
def stack_report(tmp_path_factory):
    """(the run view, report.html) of the two runs merged."""
    root = tmp_path_factory.mktemp("stack")
    folders = [subset(REFERENCE, root / "results", ("cases", "pause", "pooler", "failover", "restart", "redis_failover")),
               subset(PATRONI_RUN, root / "results", ("patroni",))]
    out = write_report(folders, root / "out" / "REPORT.md", html=True)
    return run_view(folders), out.parent / PAGE


@pytest.fixture
def opened(browser, stack_report):  # noqa: F811
    seen = open_page(browser, stack_report[1], width=WIDTH, height=HEIGHT)
    yield seen
    assert seen.errors == [] and seen.failed == []  # no console error, no request
    seen.page.close()


def shown_answer(page) -> dict:
    """The answer the page shows: its stack's query, and per need the lock to use and the next ones (or none)."""
    return page.evaluate("""() => {
      const shown = Array.from(document.querySelectorAll('section.answer')).filter(s => !s.hidden);
      if (shown.length !== 1) return {count: shown.length};
      const section = shown[0];
      return {count: 1, stack: section.dataset.stack,
              needs: Array.from(section.querySelectorAll('tbody tr')).map(tr => {
                const use = tr.querySelector('td.use'), then = tr.querySelector('td[data-locks]');
                return use ? [use.dataset.lock, ...then.dataset.locks.split(' ').filter(Boolean)] : [];
              })};
    }""")


def python_answer(view, stack) -> dict:
    advice = advise(view, stack_of(stack.services, stack.values))
    return {"count": 1, "stack": to_query(stack.services, stack.values),
            "needs": [[k.backend for k in n.qualifying[:3]] for n in advice.needs]}


def in_first_screen(page) -> bool:
    """Whether the shown answer and the stack choice lie wholly within the window, the page not scrolled."""
    return page.evaluate("""([w, h]) => {
      const box = node => node.getBoundingClientRect();
      const section = Array.from(document.querySelectorAll('section.answer')).find(s => !s.hidden);
      const inside = r => r.top >= 0 && r.left >= 0 && r.bottom <= h && r.right <= w && r.height > 0;
      return window.scrollY === 0 && inside(box(section)) && inside(box(document.getElementById('stack-choice')));
    }""", [WIDTH, HEIGHT])


def test_the_first_screen_holds_the_answer_for_every_stack(opened, stack_report):
    view, _ = stack_report
    page = opened.page
    assert shown_answer(page) == python_answer(view, EVERY_STACK)
    assert in_first_screen(page)
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "answer-every-stack.png")


@pytest.mark.parametrize("stack", PANEL_STACKS, ids=[to_query(s.services, s.values) for s in PANEL_STACKS])
def test_a_chosen_stack_is_answered_in_the_first_screen_as_the_command_line_answers_it(opened, stack_report, stack):
    view, _ = stack_report
    page = opened.page
    query = to_query(stack.services, stack.values)
    page.select_option("#stack-choice", query)
    assert page.url.endswith(query)  # the address carries the stack
    assert shown_answer(page) == python_answer(view, stack)
    page.evaluate("() => window.scrollTo(0, 0)")
    assert in_first_screen(page)


def test_the_address_keeps_the_stack_across_a_reload_and_every_stack_gives_the_page_back(opened, stack_report):
    view, _ = stack_report
    page = opened.page
    first = page.inner_html("#tool")
    stack = PANEL_STACKS[2]
    page.select_option("#stack-choice", to_query(stack.services, stack.values))
    before = shown_answer(page)
    page.reload(wait_until="load")
    assert shown_answer(page) == before == python_answer(view, stack)
    page.select_option("#stack-choice", to_query(EVERY_STACK.services, EVERY_STACK.values))
    assert "?" not in page.url and shown_answer(page) == python_answer(view, EVERY_STACK)
    assert page.inner_html("#tool").replace(' open=""', "") == first.replace(' open=""', "")


def test_a_cell_of_the_answer_opens_its_trials_as_the_grids_cells_do(opened, stack_report):
    page = opened.page
    buttons = page.locator("section.answer:not([hidden]) button.answer-cell")
    if buttons.count() == 0:
        page.select_option("#stack-choice", to_query(PANEL_STACKS[0].services, PANEL_STACKS[0].values))
        buttons = page.locator("section.answer:not([hidden]) button.answer-cell")
    assert buttons.count() > 0
    button = buttons.first
    lock = button.locator("xpath=ancestor::tr").locator("td.use").get_attribute("data-lock")
    button.click()
    page.wait_for_selector("#panel:not([hidden]) h2")
    heading = page.inner_text("#panel h2")
    assert heading.startswith(f"{lock} under ")
    cell = page.evaluate("i => window.locklabCell(i)", int(button.get_attribute("data-cell")))
    assert cell["backend"] == lock and heading == f"{lock} under {cell['label']}"


def test_an_address_naming_a_stack_the_page_does_not_list_says_so_in_one_line(browser, stack_report):  # noqa: F811
    view, path = stack_report
    seen = open_page(browser, path, width=WIDTH, height=HEIGHT)
    seen.page.goto(path.as_uri() + "?stack=postgres&postgres.pooler=session", wait_until="load")
    note = seen.page.locator("#stack-unknown")
    assert note.is_visible() and "lab doctor --advise" in note.inner_text()
    assert shown_answer(seen.page) == python_answer(view, EVERY_STACK)
    assert seen.errors == [] and seen.failed == []
    seen.page.close()
