"""Which cells a run adds trials to: the one place the settling reads the decision (issue 56).

cells_to_settle is this module's one entry point: the deciding cells are the decision's own (lab/decision/answer.py
deciding_cells, over the grid the report draws), and everything else of the settling (the rounds, the budget, the
shared-event rounds, progress, resume, meta.json: lab/runner/settle.py) reads only the SettleTargets it returns.

Two kinds of cell:
- *deciding*: for each need, every candidate under each fault column that failed any candidate of that need (✗ or
  ⚠, read for the need's harm): the cells the recommendation turns on. A candidate whose cell there is n/a, does not
  run or is not run has nothing to add; the no-lock control is no candidate, and driver rows are compared apart, as
  the page does. A cell that decides a need judged on the surviving company is settled on that harm (its failures
  are a subset of two holders'), one that decides only the writes outside the database on two holders.
- *flipped*: a cell whose mark differs between this run and a previous reference, or between two previous
  references given (an intermittent failure, ✗ <-> ○ included): any judged mark counts (✓ ✗ ⚠ ? ○ ◆ error), a cell
  one of them did not run does not.

Kill-point searches (Measured.KILL_POINT_SEARCH) are never settled: each records one trial whose struck schedules
are the trials (`measures.struck`), and the decision counts them so.
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.decision.harm import Harm
from lab.measures.kinds import Measured
from lab.report.decide import decision_of
from lab.report.declared import measured_of
from lab.report.matrix import Mark, MatrixCell, matrix_rows
from lab.report.sections import RunView
from lab.runner.settle_rule import SettleTarget, Why

# Marks that say what a lock did under the fault (or that its trials broke): a change among them is a flip.
JUDGED = frozenset({Mark.FAILED, Mark.LOST, Mark.STORE, Mark.KEPT, Mark.NOT_EXERCISED, Mark.UNKNOWN, Mark.ERROR})
# Marks of a cell the lab has nothing to add to: the fault cannot reach it, it cannot work here, or cannot be run.
IDLE = frozenset({Mark.NOT_APPLICABLE, Mark.DOES_NOT_RUN, Mark.NOT_RUN, Mark.CONTROL})

Key = tuple[str, str, str]  # (scenario, backend, column variant)


def ruled_out(run: RunView) -> dict[str, set[str]]:
    """Need title -> the candidates a fault already failed for it, over the run's records so far."""
    return {answer.need.title: set(answer.ruled_out) for answer in decision_of(run).needs}


def cells_to_settle(run: RunView, previous: Sequence[Sequence[dict]] = (),
                    out: dict[str, set[str]] | None = None) -> list[SettleTarget]:
    """The cells of `run` to add trials to, in the matrix's order (column, then row), each once with every reason it
    has. previous: the records of each earlier reference to compare marks with (none: no cell counts as flipped).

    A cell's target names the variant its trials carry (a scenario without variants records "-")."""
    rows = matrix_rows(run)
    searches = {s for s, kind in measured_of(run.meta).items() if kind is Measured.KILL_POINT_SEARCH}
    cells = {_key(c): c for _, row in rows for c in row
             if c.scenario not in searches and c.cell.mark not in IDLE and c.records}
    why: dict[Key, Why] = {}
    harm: dict[Key, Harm] = {}
    for key, judged_on in _deciding(run, rows, out or {}):
        if key in cells:
            why[key] = why.get(key, Why(0)) | Why.DECIDING
            harm[key] = Harm.SURVIVING_COMPANY if harm.get(key) is Harm.SURVIVING_COMPANY else judged_on
    for key in _flipped(run, rows, previous):
        if key in cells:
            why[key] = why.get(key, Why(0)) | Why.FLIPPED
    order = {key: i for i, key in enumerate(cells)}
    by_column = sorted(why, key=lambda k: (_column_order(rows).get((k[0], k[2]), 0), order[k]))
    return [SettleTarget.of(k[0], cells[k].records[0]["variant"], k[1], why[k], harm.get(k, Harm.SURVIVING_COMPANY))
            for k in by_column]


def _key(cell: MatrixCell) -> Key:
    return cell.scenario, cell.backend, cell.variant


def _column_order(rows: list[tuple[str, list[MatrixCell]]]) -> dict[tuple[str, str], int]:
    first = rows[0][1] if rows else []
    return {(c.scenario, c.variant): i for i, c in enumerate(first)}


def _deciding(run: RunView, rows: list[tuple[str, list[MatrixCell]]],
              out: dict[str, set[str]]) -> list[tuple[Key, Harm]]:
    """Every candidate of each need still in contention for it under each column that failed any candidate of that
    need, with the need's harm (the decision's own comparison: lab/decision). A candidate a fault already failed for
    that need cannot qualify whatever its other cells show: its failing cell is settled (its first failure found),
    and trials added to its others would decide nothing."""
    at = {(backend, c.label): _key(c) for backend, row in rows for c in row}
    found: list[tuple[Key, Harm]] = []
    for answer in decision_of(run).needs:
        gone = set(answer.ruled_out) | out.get(answer.need.title, set())
        for label, failed in answer.comparison.failed_by.items():
            found += [(at[(b, label)], answer.need.harm) for b in answer.candidates if (b, label) in at
                      and (b not in gone or b in failed)]
    return found


def _flipped(run: RunView, rows: list[tuple[str, list[MatrixCell]]],
             previous: Sequence[Sequence[dict]]) -> list[Key]:
    """The cells whose judged marks differ between this run and the previous references, or among those."""
    marks: dict[Key, set[Mark]] = {_key(c): {c.cell.mark} for _, row in rows for c in row if c.cell.mark in JUDGED}
    for records in previous:
        before = RunView.of(list(records), run.meta)
        for _, row in matrix_rows(before):
            for c in row:
                if c.cell.mark in JUDGED and _key(c) in marks:
                    marks[_key(c)].add(c.cell.mark)
    return [key for key, seen in marks.items() if len(seen) > 1]


__all__ = ["cells_to_settle", "ruled_out"]
