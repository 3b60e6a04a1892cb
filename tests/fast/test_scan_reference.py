"""`lab scan backends/` against the committed reference: the lab's own locks, read statically, must be found exactly
where the lab measured them lost (⚠) under the idle-in-transaction guard, and nowhere else.

The reference is whatever REPORT.md names (lab/scan/evidence.py reads it through the report's matrix_rows), so this
holds for the next reference too. The post's case A (the lock's own transaction left open) is checked against the
column *idle in transaction past the timeout*; its case D (a commit, then one more statement) against *one more
query, then that timeout*, where a lock left open from the start is lost too. A backend is named by its class in
backends/__init__.py's registry (the scanner reports the classes that reach a lock, never a backend's name).

Out of the scanner's reach, and so held here to cells that are not ⚠: the Node.js holders (their lock is taken in
JavaScript) and MariaDB's GET_LOCK (a lock of another server, seen but not judged). A backend whose library is not
installed where the tests run (tooz, without the `libraries` extra) cannot be followed and is left out of both sides.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

import backends
from lab.report.matrix import Mark
from lab.scan import evidence
from lab.scan.findings import Bug, Status
from lab.scan.scanner import scan

ROOT = Path(__file__).resolve().parents[2]
LOST = Mark.LOST.value


def _classes() -> dict[str, str]:
    """`module.Class` -> backend name, for every backend the registry declares (built in, or an adapter)."""
    entries = {**backends.BUILTIN, **{name: spec[0] for name, spec in backends.ADAPTERS.items()}}
    return {entry.replace(":", "."): name for name, entry in entries.items()}


@pytest.fixture(scope="module")
def reference() -> evidence.Reference:
    return evidence.load()


@pytest.fixture(scope="module")
def scanned(reference):
    report = evidence.attach(scan([str(ROOT / "backends")]), reference)
    assert report.warnings == (), report.warnings  # nothing left unread within the budget
    return report


def _library_missing(reference: evidence.Reference, backend: str) -> bool:
    """A backend whose library is not installed here: the scanner cannot follow a call into it (tests/fast runs with
    the `test` extra only, where tooz is absent)."""
    library = reference.libraries.get(backend)
    if library is None:
        return False
    try:
        metadata.version(library)
        return False
    except metadata.PackageNotFoundError:
        return True


def lost_rows(reference: evidence.Reference, column: tuple[str, str]) -> set[str]:
    return {row for (row, *col), cell in reference.cells.items()
            if tuple(col) == column and "@" not in row and cell.mark == LOST and not _library_missing(reference, row)}


def found(report, wanted: set[Bug]) -> set[str]:
    names = _classes()
    return {names[owner] for r in report.findings if r.bug in wanted for owner in r.owners if owner in names}


def test_case_a_findings_are_exactly_the_rows_lost_to_the_idle_in_transaction_guard(reference, scanned):
    expected = lost_rows(reference, evidence.LEFT_OPEN_COLUMN)
    assert expected, "the reference has no lost row under idle in transaction: nothing to hold the scanner to"
    assert found(scanned, {Bug.LEFT_OPEN}) == expected


def test_case_d_findings_are_exactly_the_rows_lost_after_one_more_query(reference, scanned):
    expected = lost_rows(reference, evidence.REOPENED_COLUMN)
    assert found(scanned, {Bug.LEFT_OPEN, Bug.REOPENED}) == expected


def test_no_other_backend_has_a_finding(reference, scanned):
    lost = lost_rows(reference, evidence.LEFT_OPEN_COLUMN) | lost_rows(reference, evidence.REOPENED_COLUMN)
    assert found(scanned, set(Bug)) <= lost


def test_every_lock_finding_cites_a_lost_cell_of_the_reference(reference, scanned):
    cited = [(r.site.shown(ROOT), r.evidence) for r in scanned.findings if r.bug in (Bug.LEFT_OPEN, Bug.REOPENED)]
    assert cited and all(e and e[0].mark == LOST and e[0].run == reference.run for _, e in cited), cited


def test_the_locks_out_of_reach_are_not_lost_there(reference, scanned):
    """The Node.js holders take their lock in JavaScript and MariaDB's GET_LOCK is another server's: the scanner
    reports none of them, which is right only while the reference has none of them lost under that guard."""
    names = _classes()
    out_of_reach = {name for name in names.values()
                    if name.startswith("node_") or reference.lock_service.get(name) == "mariadb"}
    assert out_of_reach
    assert not out_of_reach & lost_rows(reference, evidence.LEFT_OPEN_COLUMN)
    seen = {names[o] for r in scanned.results if r.status is Status.NOT_JUDGED for o in r.owners if o in names}
    get_lock = {n for n in out_of_reach if reference.lock_service.get(n) == "mariadb"
                and "session_lock" in reference.capabilities.get(n, ())}
    assert get_lock and get_lock <= seen  # seen, said to be another server's lock, not judged
