"""The matrix's library table groups its rows by the library's project and language, each with its version, from
the run's folder alone (meta.json's libraries, languages and library_versions; lab/report/libraries.py).

The rows are the committed adapters' run (redis_asyncio, portalocker_redis) and copies of their trials
planted under other names: a Node.js library, and a Python library of the same project name as it
(`redlock` on npm and a planted `redlock` on PyPI), which must not be grouped with it."""

from __future__ import annotations

import copy
from pathlib import Path

from lab.report import render_runs_files, write_report
from lab.report.sections import MATRIX
from lab.records.results import RunFolder
from tests.fast.planted import saved_run
from tests.fast.test_reference_report import matrix_tables

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = ROOT / "results" / "20261201-222824-110f"  # redis_asyncio and portalocker_redis under every scenario
PLANTED = {  # a new row: (the row whose trials it copies, its library, language and version)
    "node_redlock": ("redis_asyncio", "redlock", "Node.js", "4.2.0"),
    "node_pg_session": ("portalocker_redis", "pg", "Node.js", "8.23.1"),
    "py_redlock": ("redis_asyncio", "redlock", "Python", "9.9.9"),
    "another_portalocker": ("portalocker_redis", "portalocker", "Python", None),  # no version recorded
}


def library_run(root: Path, name: str = "libraries", languages: bool = True) -> RunFolder:
    source = RunFolder(ADAPTERS)
    meta = copy.deepcopy(source.meta())
    trials = list(source.trials())
    for row, (like, library, language, version) in PLANTED.items():
        meta["backend_order"].append(row)
        for key in ("capabilities", "lock_service", "summaries"):
            meta[key][row] = meta[key][like]
        meta["libraries"][row] = library
        if languages:
            meta.setdefault("languages", {})[row] = language
            meta.setdefault("library_versions", {})[row] = version
        trials += [{**t, "backend": row, "id": t["id"].replace(f"/{like}/", f"/{row}/")}
                   for t in source.trials() if t["backend"] == like]
    if languages:
        meta["languages"].update({"redis_asyncio": "Python", "portalocker_redis": "Python"})
        meta["library_versions"].update({"redis_asyncio": "8.1.0", "portalocker_redis": "4.4.0"})
    return saved_run(root / name, meta, trials)


def library_table(text: str) -> list[list[str]]:
    """The rows of the matrix appendix's first table, as cells (backend first), header and rule included. Every
    row of these runs is a library's, so each family of faults has that one table, under no family's heading."""
    assert "### Third-party" not in text
    table = text.split("\n| backend |", 1)[1].split("\n\n", 1)[0]
    lines = ["| backend |" + table.splitlines()[0], *table.splitlines()[1:]]
    return [[c.strip() for c in ln.strip(" |").split(" | ")] for ln in lines]


def matrix(folders: list[RunFolder]) -> str:
    """The matrix appendix of these runs."""
    return render_runs_files(folders)[MATRIX]


def test_rows_are_grouped_by_project_and_language_with_their_versions(tmp_path):
    rows = library_table(matrix([library_run(tmp_path)]))
    header, body = rows[0], rows[2:]
    assert header[:2] == ["backend", "library"]
    assert [(r[0], r[1]) for r in body] == [
        ("portalocker_redis", "portalocker 4.4.0 (Python)"),
        ("another_portalocker", "portalocker version not recorded (Python)"),
        ("redis_asyncio", "redis 8.1.0 (Python)"),
        ("py_redlock", "redlock 9.9.9 (Python)"),  # the same project name as npm's, another language: apart
        ("node_pg_session", "pg 8.23.1 (Node.js)"),
        ("node_redlock", "redlock 4.2.0 (Node.js)"),
    ]


def test_the_fault_cells_stay_those_of_the_trials_behind_them(tmp_path):
    """The library column is no fault's: every other cell is the one the same row shows without it."""
    grouped = matrix([library_run(tmp_path, "grouped")])
    plain = matrix([library_run(tmp_path, "plain", languages=False)])
    with_library = {(tuple(header), row[0]): row for header, rows in matrix_tables(grouped) for row in rows}
    without = {(tuple(header), row[0]): row for header, rows in matrix_tables(plain) for row in rows}
    assert with_library == without and len({backend for _, backend in with_library}) == 6


def test_a_run_that_recorded_no_languages_renders_as_it_did(tmp_path):
    """The committed reference runs predate `languages`: their library table keeps its shape, byte for byte."""
    folder = library_run(tmp_path, languages=False)
    rows = library_table(matrix([folder]))
    assert "library" not in rows[0]
    assert [r[0] for r in rows[2:]] == folder.meta()["backend_order"]  # the run's order, ungrouped


def test_an_older_run_merged_with_a_newer_one_takes_python_and_its_recorded_version(tmp_path):
    """A library row of a run before `languages` is a Python adapter (its library was a PyPI name), at the version
    that run recorded in `versions`."""
    older = RunFolder(ADAPTERS)
    newer = library_run(tmp_path)
    meta = newer.meta()
    for row in ("redis_asyncio", "portalocker_redis"):  # as if only the older run declared these two
        del meta["languages"][row], meta["library_versions"][row]
    newer.write_meta(meta)
    rows = {r[0]: r[1] for r in library_table(matrix([older, newer]))[2:]}
    assert rows["redis_asyncio"] == "redis 8.1.0 (Python)"  # the older run's versions["redis"]
    assert rows["node_redlock"] == "redlock 4.2.0 (Node.js)"


def test_the_html_page_shows_the_library_column_and_keeps_every_cell_clickable(tmp_path):
    folder = library_run(tmp_path)
    write_report(folder, folder.path / "REPORT.md", html=True)
    page = (folder.path / "report.html").read_text()
    assert "<th>library</th>" in page
    assert "<td>redlock 4.2.0 (Node.js)</td>" in page
    text = (folder.path / MATRIX).read_text()
    cells = sum(len(row) - 1 for _, rows in matrix_tables(text) for row in rows)
    assert page.count('<td class="cell mark-') == cells  # the appendix's; the summary's faults are "cell fault"
