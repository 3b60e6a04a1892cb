"""Store findings: where the database or its manager lost writes it had acknowledged, whatever the lock.

The no-lock control runs beside every fault (lab/report/matrix.py judges each cell beside it): a fault under which
the control lost an acknowledged write is a finding about the store, not about any lock. Each finding names the
configuration that lost writes, how many locks lost them the same way with their promise kept (◆) or with it
broken (✗, charged to the lock), and the configurations of the same scenario under which the control kept every
acknowledged write: the measured mitigation, never a recommendation from outside the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.declarations.columns import Column
from lab.decision.cells import store_losses
from lab.report.matrix import Mark, MatrixCell, control_of, declared_run, matrix_rows
from lab.report.sections import RunView, section


def _lost(cell: MatrixCell) -> int:
    return store_losses(cell.records)


def acknowledged(cell: MatrixCell) -> int:
    """The writes the store acknowledged in a cell's trials (a commit that returned ok). A trial recorded without a
    history has none (its frame cell is NaN, not a list)."""
    return sum(1 for r in cell.records if r.get("status") == "ok" and isinstance(r.get("history"), list)
               for op in r["history"] if op.get("f") == "write" and op.get("type") == "ok")


@dataclass(frozen=True)
class KeptIt:
    """A configuration of the same fault under which the control kept every acknowledged write: the measured
    mitigation."""

    scenario: str
    variant: str
    label: str
    acknowledged: int
    n: int


@dataclass(frozen=True)
class StoreFinding:
    """A fault column under which the control, which takes no lock, lost an acknowledged write."""

    scenario: str
    variant: str
    label: str
    lost: int  # the control's trials that lost one
    n: int  # the control's trials
    ran: int  # the locks that ran under it
    store: tuple[str, ...]  # those that lost one the same way with their promise kept (◆)
    broken: tuple[str, ...]  # those that lost one with it broken (✗, charged to the lock)
    kept_elsewhere: tuple[KeptIt, ...]


def store_findings(run: RunView, rows: dict[str, list[MatrixCell]] | None = None,
                   declared: list[tuple[str, Column]] | None = None) -> list[StoreFinding]:
    """Every store finding of the run, in the matrix's column order (rows and declared: the run's matrix_rows and
    declared_run, when the caller has them already)."""
    control = control_of(run.frame)
    rows = dict(matrix_rows(run)) if rows is None else rows
    if control not in rows:
        return []
    mine = rows[control]
    columns = [column for _, column in (declared_run(run) if declared is None else declared)]  # as its cells
    root = [c.same_fault_as or c.variant for c in columns]
    findings = []
    for i, cell in enumerate(mine):
        lost = _lost(cell)
        if not lost:
            continue
        others = [row[i] for backend, row in rows.items() if backend != control and "@" not in backend]
        ran = [c for c in others if c.cell.n]
        siblings = [c for j, c in enumerate(mine) if c.scenario == cell.scenario and j != i and root[j] == root[i]
                    and c.cell.n and not _lost(c)]
        findings.append(StoreFinding(
            cell.scenario, cell.variant, cell.label, lost, cell.cell.n, len(ran),
            tuple(c.backend for c in ran if c.cell.mark is Mark.STORE),
            tuple(c.backend for c in ran if c.cell.mark is Mark.FAILED and _lost(c)),
            tuple(KeptIt(c.scenario, c.variant, c.label, acknowledged(c), c.cell.n) for c in siblings)))
    return findings


def _kept_it(kept: KeptIt) -> str:
    """A configuration measured beside the finding: a remedy only where writes were acknowledged and kept under it;
    with none acknowledged it shows nothing, and says so."""
    n = kept.n
    trials = f"{n} {'trial' if n == 1 else 'trials'}"
    if not kept.acknowledged:
        return f"*{kept.label}*: not shown, no write was acknowledged in the control's {trials}"
    return f"*{kept.label}*: the control lost none of the {kept.acknowledged} writes acknowledged in its {trials}"


@section(12)
def section_store_findings(run: RunView) -> str | None:
    findings = []
    for found in store_findings(run):
        kept = "; ".join(_kept_it(k) for k in found.kept_elsewhere)
        store, broken = found.store, found.broken
        findings.append(
            f"- *{found.label}*: the control, which takes no lock, lost an acknowledged write in {found.lost} of "
            f"{found.n} trials. Of the {found.ran} locks that ran it, {len(store)} lost one the same way with "
            f"their promise kept (◆){f' and {len(broken)} with it broken (✗, charged to the lock: ' + ', '.join(f'`{b}`' for b in broken) + ')' if broken else ''}. "
            + (f"The same fault in another configuration, measured: {kept}." if kept else
               "No other configuration of this fault was measured here."))
    if not findings:
        return None
    return "\n".join(["## Store findings", "",
                      "Faults under which the database or its manager discarded writes it had acknowledged, with or "
                      "without a lock: no lock can keep these, so they disqualify none (◆ in the matrix), and the "
                      "fix is the store's configuration. Each names the configuration measured beside it that kept "
                      "every acknowledged write.", "", *findings])
