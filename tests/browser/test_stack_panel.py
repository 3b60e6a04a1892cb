"""report.html's stack panel in Chromium: a stack chosen in the page hides the faults that cannot happen to it and
answers for it as the command line does for the same stack.

The run: six of the reference run's scenarios (the idle guards, a pause, the pooler, the scripted failover, a lock
server restarted, Redis failed over) and the Patroni run's, for seven locks on PostgreSQL and one on Redis, merged as `lab report RUN RUN` merges them. For
each stack the test chooses in the form, it computes the answer in Python with `advise(run, stack).to_json()`
(lab/report/advice.py, what `lab report --stack FILE --json` prints) on the same runs and compares the page's
lines with it: the faults exposed, for each need the qualifying locks in order with their counts and weakest ✓,
the unproven, the store findings; and the grids: the columns left, the cells made n/a, each family's cell recounted.
The page's address carries the stack; reloading it, or opening it in a new page, answers the same.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import pytest

from lab.exposure import Happens, Trait
from lab.report import run_view, write_report
from lab.report.advice import CANNOT_HAPPEN, StackView, advise
from lab.report.fault_groups import FamilyCell, summary_tables
from lab.report.html import PAGE
from lab.results import RunFolder
from lab.stack_choices import from_query, stack_of, to_query
from tests.browser.test_html_in_browser import SCREENSHOTS, browser, open_page  # noqa: F401 (a fixture)
from tests.fast.planted import saved_run
from tests.fast.test_html_report import REFERENCE

pytestmark = pytest.mark.os_packages("chromium")

PATRONI_RUN = REFERENCE.parent / "20261202-040926-a47d"  # the reference's Patroni scenario (REPORT.md, Provenance)
BACKENDS = ("none", "session", "session_autocommit", "xact", "serializable", "lease_row", "tooz_pgsql", "redis_fenced")

PLAIN = (("postgres",), {Trait.POOLER: "none", Trait.REPLICATION: "none", Trait.HA_MANAGER: "none",
                         Trait.IDLE_IN_TRANSACTION_GUARD: "off", Trait.IDLE_SESSION_GUARD: "off"})
PGBOUNCER_PATRONI = (("postgres",), {Trait.POOLER: "transaction", Trait.REPLICATION: "async",
                                     Trait.HA_MANAGER: "patroni", Trait.SYNCHRONOUS_MODE: "off"})
WITH_REDIS_UNKNOWN = (("postgres", "redis"), {})  # every fact unknown: every fault counted as possible
REDIS_AOF_ALWAYS = (("postgres", "redis"), {Trait.REDIS_APPENDFSYNC: "always", Trait.REDIS_REPLICAS: "no"})


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
    seen = open_page(browser, stack_report[1])
    yield seen
    assert seen.errors == [] and seen.failed == []  # no console error, no request
    seen.page.close()


def applied(page, query: str) -> None:
    """Wait until the panel has answered for this stack (the script marks the form when it has)."""
    page.wait_for_function("q => document.getElementById('stack-form').dataset.applied === q", arg=query)


def choose(page, services: tuple[str, ...], values: dict[Trait, str]) -> str:
    """Choose a stack in the form as a reader does: every stack first, then the services, then each trait (in the
    order the form lists them, so Patroni before its settings)."""
    page.wait_for_function("() => document.getElementById('stack-form').dataset.applied !== undefined")
    if not page.locator("#stack-form").is_visible():
        page.locator("#stack-panel summary").click()
    page.click("#stack-reset")
    applied(page, "")
    for service in services:
        page.check(f'#stack-form input[name="stack"][value="{service}"]')
    for trait in Trait:
        if trait in values:
            page.select_option(f'#stack-form select[name="{trait.value}"]', values[trait])
    query = to_query(services, values)
    applied(page, query)
    return query


def page_answer(page) -> dict:
    """The page's answer, as its elements carry it."""
    return page.evaluate("""() => {
      const answer = document.getElementById('stack-answer');
      const data = node => ({...node.dataset});
      return {
        exposed: Array.from(answer.querySelectorAll('ul.exposed li')).map(li => [li.dataset.scenario,
                 li.dataset.variant, li.dataset.happens]),
        needs: Array.from(answer.querySelectorAll('.stack-need')).map(n => ({
          need: n.dataset.title, candidates: Number(n.dataset.candidates), faults: Number(n.dataset.faults),
          qualifying: Array.from(n.querySelectorAll('ol li')).map(li => [li.dataset.backend, Number(li.dataset.kept),
                      Number(li.dataset.failed), Number(li.dataset.unknown), li.dataset.weakest || null]),
          unproven: Array.from(n.querySelectorAll('p.unproven')).map(p => p.dataset.backend)})),
        store: Array.from(answer.querySelectorAll('ul.store > li')).map(li => [li.dataset.scenario, li.dataset.variant,
               li.dataset.happens]),
      };
    }""")


def cli_answer(view, services, values) -> dict:
    """The same, from `advise(run, stack).to_json()`: what `lab report --stack FILE --json` prints."""
    advice = advise(view, stack_of(services, values)).to_json()
    return {
        "exposed": [[e["scenario"], e["variant"], e["happens"]] for e in advice["exposed"]],
        "needs": [{"need": n["need"], "candidates": n["candidates"], "faults": n["faults"],
                   "qualifying": [[k["backend"], k["faults_kept"], 0, len(k["unknown"]), k["weakest"]]
                                  for k in n["qualifying"]],
                   "unproven": [b for b, _ in n["unproven"]]} for n in advice["needs"]],
        "store": [[s["scenario"], s["variant"], s["happens"]] for s in advice["store"]],
    }


def grids(page) -> dict:
    """What the summary grid shows: its fault columns left, its cells made n/a, each family's cell."""
    return page.evaluate("""() => {
      const table = document.querySelector('table.summary');
      const out = node => node.classList.contains('stack-out');
      return {
        columns: Array.from(table.querySelectorAll('thead th.fault')).filter(th => !out(th))
                 .map(th => [th.dataset.scenario, th.dataset.variant]),
        masked: Array.from(table.querySelectorAll('td.fault[data-masked]'))
                .map(td => [td.dataset.backend, td.dataset.scenario, td.dataset.variant]),
        families: Array.from(table.querySelectorAll('td.family-cell')).filter(td => !out(td))
                  .map(td => [td.dataset.backend, td.dataset.family, td.textContent]),
        rows: Array.from(table.querySelectorAll('tbody tr')).filter(tr => !tr.hidden).map(tr => tr.dataset.backend),
      };
    }""")


def python_grids(view, services, values) -> dict:
    """The summary grid as the stack sees it, from the advice's own StackView: the columns it is exposed to, the
    cells that cannot happen to their lock (n/a), each family's cell over what is left, the locks it can run."""
    stack = stack_of(services, values)
    exposed = {(e.scenario, e.variant) for e in advise(view, stack).exposed}
    stack_view = StackView.of(view, stack)
    index = {(s, c.variant): i for i, (s, c) in enumerate(stack_view.columns)}
    (table, *_) = summary_tables(view)
    columns, masked, families, rows = [], [], [], []
    for backend, cells in table.summary.rows:
        left = [m for f in cells for m in f.cells if (m.scenario, m.variant) in exposed]
        if not columns:
            columns = [[m.scenario, m.variant] for m in left]
        na = [m for m in left if stack_view.answer(backend, index[(m.scenario, m.variant)]).happens is Happens.NO]
        masked += [[backend, m.scenario, m.variant] for m in na]
        for f in cells:
            kept = tuple(replace(m, cell=CANNOT_HAPPEN) if m in na else m
                         for m in f.cells if (m.scenario, m.variant) in exposed)
            if kept:
                families.append([backend, f.family.value, FamilyCell(backend, f.family, kept).text])
        services_of = stack_view.services.get(backend)
        if backend == stack_view.control or services_of is None or services_of <= stack.services():
            rows.append(backend)
    return {"columns": columns, "masked": masked, "families": families, "rows": rows}


@pytest.mark.parametrize("stack", [PLAIN, PGBOUNCER_PATRONI, WITH_REDIS_UNKNOWN, REDIS_AOF_ALWAYS],
                         ids=["plain-postgres", "pgbouncer-transaction-patroni-async", "postgres-redis-unknown",
                              "redis-aof-always-no-replica"])
def test_a_stack_chosen_in_the_page_is_answered_as_the_command_line_answers_it(opened, stack_report, stack):
    view, _ = stack_report
    services, values = stack
    page = opened.page
    query = choose(page, services, values)
    assert page.url.endswith(query)  # the address carries the stack
    assert from_query(query) == (services, values)
    expected = cli_answer(view, services, values)
    assert expected["needs"] and page_answer(page) == expected
    assert grids(page) == python_grids(view, services, values)


def test_the_lines_change_with_the_stack_as_the_command_lines_do(opened, stack_report):
    """Plain PostgreSQL, then PgBouncer in transaction mode with Patroni asynchronous: the page's lines move as the
    advice's do; a lock that qualified on the plain stack no longer does, and Patroni's store finding appears."""
    view, _ = stack_report
    page = opened.page
    answers = []
    for services, values in (PLAIN, PGBOUNCER_PATRONI):
        choose(page, services, values)
        answers.append(page_answer(page))
        assert answers[-1] == cli_answer(view, services, values)
    plain, pooled = ({n["need"]: [q[0] for q in n["qualifying"]] for n in a["needs"]} for a in answers)
    assert plain != pooled
    assert any(set(plain[need]) - set(pooled.get(need, [])) for need in plain)
    assert not answers[0]["store"] and answers[1]["store"]  # the Patroni finding concerns only the second
    assert len(answers[1]["exposed"]) > len(answers[0]["exposed"])


def test_the_address_keeps_the_stack_across_a_reload_and_into_a_new_page(opened, browser, stack_report):  # noqa: F811
    view, path = stack_report
    page = opened.page
    query = choose(page, *PGBOUNCER_PATRONI)
    before = (page_answer(page), grids(page))
    page.reload(wait_until="load")
    applied(page, query)
    assert page.locator("#stack-form").is_visible()  # the panel opens on the stack it was given
    assert page.locator('select[name="postgres.pooler"]').input_value() == "transaction"
    assert (page_answer(page), grids(page)) == before
    shared = open_page(browser, path)  # a new page, given the address as a link shares it
    shared.page.goto(path.as_uri() + query, wait_until="load")
    applied(shared.page, query)
    assert (page_answer(shared.page), grids(shared.page)) == before
    assert shared.errors == [] and shared.failed == []
    shared.page.close()
    page.set_viewport_size({"width": 1280, "height": 800})
    page.locator('table.summary th.family button[data-family="poolers"]').click()
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "stack-panel.png")


def test_every_stack_again_gives_the_page_back_as_it_was(opened, stack_report):
    page = opened.page
    page.wait_for_function("() => document.getElementById('stack-form').dataset.applied !== undefined")
    summary = page.inner_html("#tool")
    first = grids(page)
    choose(page, *PGBOUNCER_PATRONI)
    assert grids(page) != first
    page.click("#stack-reset")
    applied(page, "")
    assert "?" not in page.url and page.locator("#stack-answer").is_hidden()
    assert grids(page) == first
    after = page.inner_html("#tool")
    assert after.replace(' open=""', "") == summary  # every cell, count and star as it was


def test_an_address_naming_what_the_page_does_not_know_says_so_in_one_line(browser, stack_report):  # noqa: F811
    _, path = stack_report
    seen = open_page(browser, path)
    seen.page.goto(path.as_uri() + "?stack=postgres&postgres.pooler=maybe&postgres.colour=red", wait_until="load")
    applied(seen.page, "?stack=postgres")
    note = seen.page.locator("#stack-form .note")
    assert note.count() == 1 and "postgres.pooler=maybe, postgres.colour=red" in note.inner_text()
    assert seen.errors == [] and seen.failed == []
    seen.page.close()

