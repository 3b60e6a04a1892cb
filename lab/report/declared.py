"""The faults the report's tables are headed by: what each run's meta.json declared (lab/columns.py).

A run recorded before meta.json kept these declarations renders with the lab's own, which the command
line installs once (`install`): the report itself never imports a scenario. A run's own declaration of
a scenario wins over the installed one, as its trials do.
"""

from __future__ import annotations

from lab.columns import Column, FaultColumns, from_meta

_installed: dict[str, FaultColumns] = {}


def install(declared: list[FaultColumns]) -> None:
    """The lab's current declarations, for runs that did not record theirs."""
    _installed.clear()
    _installed.update({f.scenario: f for f in declared})


def faults_of(meta: dict) -> list[FaultColumns]:
    """Every declared fault, in column order: the run's own declarations over the installed ones."""
    merged = {**_installed, **{f.scenario: f for f in from_meta(meta)}}
    return sorted(merged.values(), key=lambda f: (f.order, f.scenario))


def matrix_columns(meta: dict) -> list[tuple[str, Column]]:
    """(scenario, column) for every declared column, in the order the matrix shows them."""
    found = [(f.scenario, c) for f in faults_of(meta) for c in f.columns]
    return sorted(found, key=lambda sc: (sc[1].order, sc[0]))


def lease_faults(meta: dict) -> list[FaultColumns]:
    """The faults of the lease-fault trial shape (the told and lease tables), in column order."""
    return [f for f in faults_of(meta) if f.breaks_leases]


def control_of(meta: dict, scenario: str) -> str | None:
    """The scripted control a managed scenario names: as its run recorded it, or, for a run recorded before controls
    were declared (no "control" key), the lab's own declaration."""
    recorded = (meta.get("faults") or {}).get(scenario)
    if recorded is not None and "control" in recorded:
        return recorded["control"]
    installed = _installed.get(scenario)
    return installed.control if installed is not None else None
