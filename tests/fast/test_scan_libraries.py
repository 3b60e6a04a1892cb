"""lab scan held to code no one here wrote: the installed lock libraries the lab judges, each scanned as installed, its
static verdict beside the lab's measured cell for that library (docs/scan.md's table says the same, with the rest).

Skipped where a library is not installed (pip install -e '.[libraries]').
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lab.report.matrix import Mark
from lab.scan import evidence
from lab.scan.findings import Bug, LockKind, Status
from lab.scan.scanner import scan


def installed(module: str) -> Path:
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:  # its package is not there either
        spec = None
    if spec is None or spec.origin is None:
        pytest.skip(f"{module} is not installed: pip install -e '.[libraries]'")
    return Path(spec.origin)


@pytest.fixture(scope="module")
def reference() -> evidence.Reference:
    return evidence.load()


def test_tooz_postgresql_driver_leaves_its_lock_open_as_the_lab_measured(reference):
    report = evidence.attach(scan([str(installed("tooz.drivers.pgsql"))]), reference)
    found = {(r.bug, r.call) for r in report.findings}
    assert found == {(Bug.LEFT_OPEN, "pg_advisory_lock"), (Bug.LEFT_OPEN, "pg_try_advisory_lock"),
                     (Bug.RELEASE_FALSE_IGNORED, "pg_advisory_unlock")}
    for result in report.findings:
        if result.bug is Bug.LEFT_OPEN:
            assert result.library == "tooz" and result.connection.made_at is not None
            [cited] = result.evidence
            assert (cited.backend, cited.mark) == ("tooz_pgsql", Mark.LOST.value)


def test_django_pglock_takes_its_session_lock_in_autocommit_as_the_lab_measured(reference):
    report = evidence.attach(scan([str(installed("pglock.core").parent)]), reference)
    session = [r for r in report.results if r.lock is LockKind.SESSION]
    assert session and all(r.status is Status.FINE for r in session)
    assert {(r.evidence[0].backend, r.evidence[0].mark) for r in session} == {("pglock_session",
                                                                               Mark.NOT_EXERCISED.value)}
    # What the lab's adapter works around (it reads PostgreSQL's WARNING instead): release() drops the answer.
    assert {(r.bug, r.call) for r in report.findings} == {(Bug.RELEASE_FALSE_IGNORED, "pg_advisory_unlock")}


@pytest.mark.parametrize("module, read", [("pottery", 0), ("sherlock", 0), ("kazoo.recipe.lock", 0),
                                          ("redis_lock", 1)])  # its Django cache backend imports Django
def test_the_redis_and_zookeeper_lock_libraries_take_no_postgresql_lock(module, read):
    origin = installed(module)
    report = scan([str(origin.parent if origin.name == "__init__.py" else origin)])
    assert report.results == () and report.files - report.unreached == read
