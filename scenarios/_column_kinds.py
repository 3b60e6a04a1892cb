"""A kind of fault column: what several columns of one scenario declare alike (their family, the services they
strike, the stack conditions they share), written once so that each column declares only what is its own."""

from __future__ import annotations

from dataclasses import dataclass

from lab.declarations.columns import Column, FaultFamily
from lab.stack.exposure import When


@dataclass(frozen=True)
class ColumnKind:
    """The family, conditions, services and kinds of right a scenario's columns share (lab/declarations/columns.py says what each
    means); happens_when () is every stack, strikes None whichever service holds the lock, needs () every lock."""

    family: FaultFamily
    happens_when: tuple[When, ...] = ()
    strikes: tuple[str, ...] | None = None
    needs: tuple[str, ...] = ()  # the kinds of right the fault bears on (Column.needs)
    cannot_take: tuple[str, ...] = ()  # rights it reaches but cannot take away (Column.cannot_take), and why
    cannot_take_why: str = ""

    def __call__(self, variant: str, label: str, order: float, legend: str, *, also: tuple[When, ...] = (),
                 same_fault_as: str | None = None, setting: str | None = None,
                 cannot_take: tuple[str, ...] = (), cannot_take_why: str = "") -> Column:
        """One column of this kind; also: conditions of its own, after the kind's; cannot_take: rights this column
        alone cannot take away (with why), in place of the kind's."""
        return Column(variant, label, order, legend, family=self.family, setting=setting, same_fault_as=same_fault_as,
                      happens_when=self.happens_when + also, strikes=self.strikes, needs=self.needs,
                      cannot_take=cannot_take or self.cannot_take, cannot_take_why=cannot_take_why or self.cannot_take_why)
