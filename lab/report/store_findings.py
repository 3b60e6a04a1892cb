"""Store findings: where the database or its manager lost writes it had acknowledged, whatever the lock.

The no-lock control runs beside every fault (lab/report/matrix.py judges each cell beside it): a fault under which
the control lost an acknowledged write is a finding about the store, not about any lock. Each finding names the
configuration that lost writes, how many locks lost them the same way with their promise kept (◆) or with it
broken (✗, charged to the lock), and the configurations of the same scenario under which the control kept every
acknowledged write: the measured mitigation, never a recommendation from outside the run.
"""

from __future__ import annotations

from lab.report.charge import store_losses
from lab.report.matrix import Mark, MatrixCell, control_of, declared_run, matrix_rows
from lab.report.sections import RunView, section


def _lost(cell: MatrixCell) -> int:
    return store_losses(cell.records)


def _acknowledged(cell: MatrixCell) -> int:
    """The writes the store acknowledged in a cell's trials (a commit that returned ok)."""
    return sum(1 for r in cell.records if r.get("status") == "ok" for op in (r.get("history") or [])
               if op.get("f") == "write" and op.get("type") == "ok")


def _kept_it(cell: MatrixCell) -> str:
    n, acknowledged = cell.cell.n, _acknowledged(cell)
    return (f"*{cell.label}*: the control lost none of the {acknowledged} writes acknowledged in its {n} "
            f"{'trial' if n == 1 else 'trials'}")


@section(12)
def section_store_findings(run: RunView) -> str | None:
    control = control_of(run.frame)
    rows = dict(matrix_rows(run))
    if control not in rows:
        return None
    mine = rows[control]
    columns = [column for _, column in declared_run(run)]  # in the matrix's order, as its cells
    root = [c.same_fault_as or c.variant for c in columns]
    findings = []
    for i, cell in enumerate(mine):
        lost = _lost(cell)
        if not lost:
            continue
        others = [row[i] for backend, row in rows.items() if backend != control and "@" not in backend]
        ran = [c for c in others if c.cell.n]
        store = [c.backend for c in ran if c.cell.mark is Mark.STORE]
        broken = [c.backend for c in ran if c.cell.mark is Mark.FAILED and _lost(c)]
        siblings = [c for j, c in enumerate(mine) if c.scenario == cell.scenario and j != i and root[j] == root[i]
                    and c.cell.n and not _lost(c)]
        kept = "; ".join(_kept_it(c) for c in siblings)
        findings.append(
            f"- *{cell.label}*: the control, which takes no lock, lost an acknowledged write in {lost} of "
            f"{cell.cell.n} trials. Of the {len(ran)} locks that ran it, {len(store)} lost one the same way with "
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
