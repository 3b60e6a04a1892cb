"""A run's matrix as the decision reads it: for each harm, every backend's cells over the same fault columns.

The report builds it from a run's files (lab/report/matrix.py judges the cells), the stack advice masks the columns
that cannot happen to a stack, and the decision reads nothing else: plain cells, declarations and costs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from lab.decision.cells import Cell, Mark
from lab.decision.cost import CompanyCost
from lab.decision.harm import Harm

CANNOT_HAPPEN = Cell(Mark.NOT_APPLICABLE, "n/a: cannot happen to this stack")


@dataclass(frozen=True)
class Grid:
    """labels: the fault columns in the matrix's order; cells[harm][backend]: that backend's cells in that order,
    read for the harm; meta: the run's declarations; costs: each lock's measured cost per company (None: not
    measured)."""

    labels: tuple[str, ...]
    cells: dict[Harm, dict[str, tuple[Cell, ...]]]
    meta: dict
    control: str | None
    costs: dict[str, CompanyCost | None] = field(default_factory=dict)

    @property
    def backends(self) -> list[str]:
        """Every row, the control and drivers' rows included, in the run's order."""
        return list(next(iter(self.cells.values()), {}))

    def row(self, harm: Harm, backend: str) -> dict[str, Cell]:
        """label -> cell of one backend read for a harm."""
        return dict(zip(self.labels, self.cells[harm][backend]))

    def masked(self, hidden: dict[str, set[int]]) -> Grid:
        """The grid with the cells that cannot happen (backend -> column indices) made n/a, for every harm."""
        cells = {harm: {backend: tuple(CANNOT_HAPPEN if i in hidden.get(backend, ()) else cell
                                       for i, cell in enumerate(row))
                        for backend, row in rows.items()}
                 for harm, rows in self.cells.items()}
        return replace(self, cells=cells)
