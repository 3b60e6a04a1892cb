"""What one of the post's "Why not just...?" alternatives is, as the whynot scenario runs it: an experiment.

An experiment declares its variants, which backends it applies to (from their declared capabilities
alone, with the reason when not: the saved runs and the report carry that reason word for word), how
one trial runs, and what its measures say (a verdict in words, a safety). The whynot scenario gathers
the experiments from one list and hands each trial to the one that declares its variant; it stamps
the variant on the measures as their kind, so a kind names one variant and finds its experiment again.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from backends.base import Backend
from lab.declarations.capabilities import Capability
from lab.checkers.outcomes import Safety
from scenarios.base import TrialEnv


class Experiment(ABC):
    """One alternative of the post's table: its variants, the backends it applies to, a trial, its words."""

    variants: ClassVar[tuple[str, ...]]
    # The capabilities a backend must declare, and why it is n/a without them; an experiment whose
    # selection is more than that overrides applies().
    requires: ClassVar[frozenset[Capability]] = frozenset()
    reason: ClassVar[str] = ""
    # How many trials a cell runs: None, the profile's count; an experiment that repeats its own measurement
    # to a stated precision inside one trial declares 1, since more trials would repeat that figure.
    trials: ClassVar[int | None] = None
    # Whether its trials run with none of the scenario's other trials beside them (WhyNot.exclusive, which its
    # Pacing declares as Exclusive.PER_TRIAL): True for one that reads the database's VACUUM horizon, sets a guard
    # on the whole database, or times the machine;
    # an experiment whose two runs only wait on each other's locks declares False and runs beside its like.
    alone: ClassVar[bool] = True

    def applies(self, backend_cls: type[Backend]) -> str | None:
        """None when every variant of this experiment can run the backend, else the reason it cannot."""
        return None if self.requires <= backend_cls.capabilities else self.reason

    @abstractmethod
    def run(self, env: TrialEnv, variant: str) -> dict:
        """Run one trial of the variant for real and return its measures (the scenario adds their kind)."""

    @abstractmethod
    def verdict(self, measures: dict) -> str:
        """The trial's outcome in words, chosen by its figures."""

    def safety(self, measures: dict) -> Safety:
        """Unsafe only where two runs rebuilt one company at once as the backend is configured by default;
        an experiment that measures a cost or an edge harms no company."""
        return Safety.SAFE


class WaitingExperiment(Experiment, ABC):
    """An experiment whose runs wait on each other's locks and time only those waits: it runs beside its like."""

    alone = False


def is_session_lock_on_postgres(cls: type[Backend]) -> bool:
    """A PostgreSQL session lock held for the whole run on a connection of its own (the post's methods 1-3)."""
    return Capability.SESSION_LOCK in cls.capabilities and cls.lock_service == "postgres"


def hands_out(cls: type[Backend]) -> bool:
    """A queue: the backend hands out the next company (rebuild_next) instead of being given one."""
    return Capability.QUEUE in cls.capabilities
