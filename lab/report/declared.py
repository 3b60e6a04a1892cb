"""The faults the report's tables are headed by: what each run's meta.json declared (lab/declarations/columns.py).

A run recorded before meta.json kept these declarations renders with the lab's own, which the command
line installs once (`install`): the report itself never imports a scenario. A run's own declaration of
a scenario wins over the installed one, as its trials do.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from lab.declarations.columns import Column, FaultColumns, from_meta
from lab.stack.exposure import When
from lab.measures.kinds import Measured
from lab.declarations.post_role import PostRole

_installed: dict[str, FaultColumns] = {}
_installed_roles: dict[str, str] = {}
_installed_measured: dict[str, str] = {}


def install(declared: list[FaultColumns]) -> None:
    """The lab's current declarations, for runs that did not record theirs."""
    _installed.clear()
    _installed.update({f.scenario: f for f in declared})


def faults_of(meta: dict) -> list[FaultColumns]:
    """Every declared fault, in column order: the run's own declarations over the installed ones."""
    recorded = meta.get("faults") or {}
    merged = {**_installed, **{f.scenario: _families_filled(f, recorded[f.scenario]) for f in from_meta(meta)}}
    return sorted(merged.values(), key=lambda f: (f.order, f.scenario))


def _families_filled(fault: FaultColumns, recorded: dict) -> FaultColumns:
    """A run's declaration with the family of each column it recorded none for (a run recorded before columns
    declared families) taken from the lab's own declaration of the same scenario and variant, as control_of
    does for controls; a column the lab no longer declares keeps OTHER. Nothing is read from a name."""
    own = _installed.get(fault.scenario)
    installed = {c.variant: c.family for c in own.columns} if own is not None else {}
    columns = tuple(replace(c, family=installed[c.variant]) if "family" not in raw and c.variant in installed else c
                    for c, raw in zip(fault.columns, recorded.get("columns") or ()))
    return replace(fault, columns=columns)


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


class Declared(str, Enum):
    """Where the stacks a column's fault can happen to were declared."""

    RUN = "by the run"
    LAB = "by this lab (the run recorded none)"
    NOWHERE = "nowhere: taken to happen to every stack"


@dataclass(frozen=True)
class Happening:
    """Where a column's fault can happen (lab/stack/exposure.py), and who declared it."""

    conditions: tuple[When, ...] | None  # None: every stack
    strikes: tuple[str, ...] | None
    declared: Declared
    same_fault_as: str | None = None  # from the same declaration (a run that recorded no stacks recorded no sibling)


def conditions_of(scenario: str, column: Column) -> Happening:
    """The stacks a column's fault can happen to and the services it strikes: as its run declared them; for a run
    recorded before columns declared them, as this lab declares the same column; else every stack, said so."""
    if column.happens_when is not None:
        return Happening(column.happens_when, column.strikes, Declared.RUN, column.same_fault_as)
    installed = _installed.get(scenario)
    same = next((c for c in installed.columns if c.variant == column.variant), None) if installed else None
    if same is not None and same.happens_when is not None:
        return Happening(same.happens_when, same.strikes, Declared.LAB, column.same_fault_as or same.same_fault_as)
    return Happening(None, None, Declared.NOWHERE, column.same_fault_as)


def install_measured(measured: dict[str, str]) -> None:
    """What the lab's scenarios measure by name (scenarios.measured), for runs that did not record it."""
    _installed_measured.clear()
    _installed_measured.update(measured)


def measured_of(meta: dict) -> dict[str, Measured]:
    """Scenario name -> what its trials measure (lab/measures/kinds.py): the run's record over the installed
    declarations (a run recorded before meta.json kept them reads the lab's). A kind this lab does not know is
    left out, so no section reads its trials."""
    merged = {**_installed_measured, **(meta.get("measured") or {})}
    known = {kind.value: kind for kind in Measured}
    return {name: known[kind] for name, kind in merged.items() if kind in known}


def install_roles(roles: dict[str, str]) -> None:
    """The lab's current post roles by backend name (backends.post_roles), for runs that did not record theirs."""
    _installed_roles.clear()
    _installed_roles.update(roles)


def post_roles(meta: dict) -> dict[str, PostRole]:
    """Backend name -> the post's role it plays (lab/declarations/post_role.py), as the run recorded them; a run recorded
    before meta.json kept them reads the installed declarations. A value this lab does not know is left out."""
    recorded = meta.get("post_roles")
    roles = _installed_roles if recorded is None else recorded
    known = {role.value: role for role in PostRole}
    return {name: known[role] for name, role in roles.items() if role in known}
