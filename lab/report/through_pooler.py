"""Which locks still work through a pooler: the poolers family's cells, said as one sentence per pool mode.

A tech lead whose application is given a PgBouncer address asks this first; the matrix answers it across a family
of columns. Each column of the poolers family declares the pool mode it happens under (its `happens_when` on the
stack trait `postgres.pooler`), so the sentence is built from the declarations and the cells, never from a column's
name.
"""

from __future__ import annotations

from lab.declarations.columns import FaultFamily
from lab.decision.cells import Mark
from lab.decision.standing import Outcome, outcome_of
from lab.stack.exposure import Trait
from lab.report.declared import conditions_of
from lab.report.matrix import control_of, declared_run, matrix_rows
from lab.report.sections import RunView, section

SAYS = ((Outcome.KEPT, "kept the company whole"), (Outcome.STORE, "lost only what the store lost"),
        (Outcome.FAILED, "failed"), (Outcome.NOT_EXERCISED, "were never exercised (proves nothing)"),
        (Outcome.UNKNOWN, "are unknown"))


def pool_mode_of(scenario: str, column) -> str | None:
    """The pool mode a column's fault happens under, by its declaration, or None for a column of no pooler."""
    found = conditions_of(scenario, column).conditions or ()
    modes = [value for when in found if when.trait is Trait.POOLER for value in when.any_of]
    return modes[0] if len(modes) == 1 else None


def pooler_lines(run: RunView) -> list[str]:
    """'- Through PgBouncer in transaction mode (*label*): `a`, `b` kept the company whole; `c` failed; ...'."""
    columns = declared_run(run)
    modes = {column.label: mode for scenario, column in columns
             if column.family is FaultFamily.POOLERS and (mode := pool_mode_of(scenario, column))}
    if not modes:
        return []
    control = control_of(run.frame)
    rows = [(b, cells) for b, cells in matrix_rows(run) if b != control and "@" not in b]
    lines = []
    for label, mode in modes.items():
        by: dict[Outcome, list[str]] = {}
        for backend, cells in rows:
            cell = next(c.cell for c in cells if c.label == label)
            if cell.mark is not Mark.NOT_APPLICABLE:
                by.setdefault(outcome_of(cell), []).append(f"`{backend}`")
        said = [f"{', '.join(by[o])} {words}" for o, words in SAYS if by.get(o)]
        if said:
            lines.append(f"- Through PgBouncer in {mode} mode (*{label}*): {'; '.join(said)}.")
    return lines


@section(11.5)
def section_through_pooler(run: RunView) -> str | None:
    lines = pooler_lines(run)
    if not lines:
        return None
    return "\n".join(["**Through a pooler**, the poolers family's cells in one line per pool mode (read for the "
                      "surviving company; the matrix has each cell):", "", *lines, ""])
