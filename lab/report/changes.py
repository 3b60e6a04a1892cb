"""Every cell whose mark changed against the previous reference: both marks, and what stands behind the new one.

A lock that failed one trial in three passes three trials about a third of the time, so a change of mark is news
whichever way it goes (✓ ✗ ⚠ ? ○ ◆ *unaffected*, *not run*: any two differ); a cell that failed before and passes
now says how many trials stand behind the pass. The marks are the matrix's (read for the surviving company), each
judged by this lab's rules on both references' trials, so a change can come from the trials or from the rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.decision.cells import Cell, Mark
from lab.decision.standing import Outcome, outcome_of
from lab.report.common import md_table
from lab.report.matrix import matrix_rows
from lab.report.sections import RunView, section

FAILING = (Mark.FAILED, Mark.LOST)


@dataclass(frozen=True)
class Changed:
    backend: str
    label: str
    before: Mark
    cell: Cell

    @property
    def passes_now(self) -> bool:
        """Failed in the previous reference, kept the company whole now."""
        return self.before in FAILING and outcome_of(self.cell) in (Outcome.KEPT, Outcome.STORE, Outcome.UNAFFECTED)


def changed_cells(run: RunView) -> list[Changed]:
    """The matrix's cells marked ↯, in the matrix's order."""
    return [Changed(backend, c.label, c.cell.previous, c.cell) for backend, cells in matrix_rows(run) for c in cells
            if c.cell.unstable and c.cell.previous is not None]


def _behind(change: Changed) -> str:
    cell = change.cell
    if change.passes_now:
        return f"passes now on {cell.exercised} exercised of {cell.n} trials"
    if cell.mark is Mark.FAILED:
        return f"{cell.failed} of {cell.n} trials failed"
    return f"{cell.n} trials"


@section(14)
def section_changes(run: RunView) -> str | None:
    if not run.previous_id:
        return None
    changed = changed_cells(run)
    if not changed:
        return None
    rows = [[f"`{c.backend}`", c.label, c.before.value, c.cell.mark.value, _behind(c)] for c in changed]
    return "\n".join(["## Changes since the previous reference", "",
                      f"{len(changed)} cells whose mark differs from the previous reference's (`{run.previous_id}`), "
                      "both judged by this lab's rules; the matrix marks each ↯.", "",
                      md_table(["backend", "fault", "was", "now", "behind the new mark"], rows), ""])
