"""The lab's measured cell behind each scan result: the backend that takes the lock the same way, under the fault
the result is about, read from the committed reference at scan time.

This is the scanner's only reading of a run, kept in one module so it can be re-pointed when the report's judgement
moves: it asks lab.report for the committed reference's folders (the runs REPORT.md's Provenance names), its RunView
and its matrix cells (matrix_rows), and never stores a mark of its own. Which row takes a lock "the same way":

- a lock taken inside an installed library: the backend that drives that library's PostgreSQL lock (tooz's for
  tooz, django-pglock's for django-pglock), as the reference's meta.json declares each backend's library;
- otherwise the backend that plays the post's method the code turned out to be (its post role), on the driver row
  that matches the connection's client (`session@psycopg` for psycopg 3; the base row for the run's default driver).

A bug-1 result cites the column of its case (left open: *idle in transaction past the timeout*; reopened after a
commit: *one more query, then that timeout*); a fine session lock cites the first. Releases, row locks and locks on
another server cite nothing: no backend of the lab releases by swallowing, and the idle guard does not reach them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from lab.declarations.capabilities import Capability
from lab.declarations.post_role import PostRole
from lab.scan.findings import Bug, Connection, Driver, Evidence, LockKind, Result, ScanReport, Status, TxMode

# The fault columns a result is about: (scenario, variant) as the reference's meta.json names them.
LEFT_OPEN_COLUMN = ("cases", "idle_in_transaction")
REOPENED_COLUMN = ("cases", "query_then_idle_in_transaction")
POSTGRES = "postgres"


@dataclass(frozen=True)
class Cell:
    mark: str
    text: str
    label: str


@dataclass(frozen=True)
class Reference:
    """What the scanner needs of one reference run: its cells under the two columns, and its declarations."""

    run: str
    cells: dict[tuple[str, str, str], Cell]  # (row, scenario, variant) -> its cell
    rows: tuple[str, ...]
    roles: dict[str, str]  # backend -> its post role's value
    libraries: dict[str, str]  # backend -> the library it drives
    lock_service: dict[str, str]
    capabilities: dict[str, tuple[str, ...]]
    default_driver: str | None

    def row_of(self, backend: str, driver: str | None) -> str:
        """The matrix row of a backend on a driver: the base row for the run's default driver."""
        if driver is None or driver == self.default_driver:
            return backend
        candidate = f"{backend}@{driver}"
        return candidate if candidate in self.rows else backend


def load(checkout: Path | None = None) -> Reference:
    """The committed reference, through the report's own reading of it (LabError, one line, when there is none)."""
    from lab.report import run_view
    from lab.report.advice import reference_folders
    from lab.report.matrix import matrix_rows

    folders = reference_folders(checkout) if checkout is not None else reference_folders()
    view = run_view(folders)
    wanted = {LEFT_OPEN_COLUMN, REOPENED_COLUMN}
    cells: dict[tuple[str, str, str], Cell] = {}
    rows: list[str] = []
    for backend, row in matrix_rows(view):
        rows.append(backend)
        for cell in row:
            if (cell.scenario, cell.variant) in wanted:
                cells[(backend, cell.scenario, cell.variant)] = Cell(cell.cell.mark.value, cell.cell.text, cell.label)
    meta = view.meta
    drivers = list(meta.get("drivers") or [])
    default = next((d for d in drivers if not any(r.endswith(f"@{d}") for r in rows)), None)
    return Reference(view.run_id, cells, tuple(rows), dict(meta.get("post_roles") or {}),
                     {b: lib for b, lib in (meta.get("libraries") or {}).items() if lib and "@" not in b},
                     dict(meta.get("lock_service") or {}),
                     {b: tuple(c) for b, c in (meta.get("capabilities") or {}).items()}, default)


def lab_driver(connection: Connection | None) -> str | None:
    """The lab's driver row (lab/servers/postgres/drivers.py's names) whose client behaves as this connection's."""
    if connection is None:
        return None
    if connection.driver is Driver.SQLALCHEMY:
        return "sqlalchemy+psycopg" if connection.dialect == "psycopg" else "psycopg2"
    if connection.driver is Driver.DJANGO:
        return "django_atomic" if connection.in_block or connection.mode is TxMode.AUTOBEGIN else "django"
    return {Driver.PSYCOPG2: "psycopg2", Driver.PSYCOPG: "psycopg", Driver.ASYNCPG: "asyncpg",
            Driver.SQLALCHEMY_ASYNC: "sqlalchemy+asyncpg"}.get(connection.driver)


def _column(result: Result) -> tuple[str, str] | None:
    if result.lock is not LockKind.SESSION or result.status not in (Status.FINDING, Status.FINE):
        return None
    return REOPENED_COLUMN if result.bug is Bug.REOPENED else LEFT_OPEN_COLUMN


def _library_backend(ref: Reference, library: str, lock: LockKind) -> str | None:
    wanted = Capability.SESSION_LOCK.value if lock is LockKind.SESSION else Capability.IN_TRANSACTION.value
    for backend in ref.rows:
        if ref.libraries.get(backend) == library and ref.lock_service.get(backend) == POSTGRES \
                and wanted in ref.capabilities.get(backend, ()):
            return backend
    return None


def _role_backend(ref: Reference, role: PostRole) -> str | None:
    return next((b for b in ref.rows if ref.roles.get(b) == role.value), None)


def cite(ref: Reference, result: Result) -> Evidence | None:
    column = _column(result)
    if column is None:
        return None
    driver = lab_driver(result.connection)
    if result.library is not None:
        backend = _library_backend(ref, result.library, result.lock)
        why = f"the lab's backend for {result.library}'s PostgreSQL lock"
        row = backend
    else:
        backend = _role_backend(ref, result.method) if result.method is not None else None
        why = f"the post's {result.method.__doc__}" if result.method is not None else ""
        row = ref.row_of(backend, driver) if backend is not None else None
        if row is not None and row != backend:
            why += f", on the lab's {driver} driver"
    if row is None:
        return None
    cell = ref.cells.get((row, *column))
    if cell is None:
        return None
    return Evidence(ref.run, row, cell.label, cell.mark, cell.text, why)


def attach(report: ScanReport, ref: Reference) -> ScanReport:
    """The report with each result's evidence, and the reference it came from."""
    results = []
    for result in report.results:
        found = cite(ref, result)
        results.append(replace(result, evidence=(found,)) if found is not None else result)
    return replace(report, results=tuple(results), reference=ref.run)
