"""The candidates for one need compared on the same evidence, and ranked by rules the page states.

Same evidence: for every fault that failed any candidate, every other candidate shows a ✓ with its n, a store's
loss with its promise kept (◆), a declared and checked reason the fault cannot reach its lock (*unaffected*), or
n/a; otherwise it is unproven there, and cannot qualify by never having been tested where a rival broke.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property

from lab.decision.cells import Cell
from lab.decision.cost import CompanyCost
from lab.decision.standing import ANSWERS_A_RIVALS_FAILURE, Outcome, Standing, outcome_of
from lab.decision.strength import STRONG_AT_MOST
from lab.declarations.described_enum import DescribedStrEnum


class Adoption(IntEnum):
    """What adopting a lock takes, least first: read from its declarations (its post role, its library)."""

    POSTS_FIX = 0  # the post's own fix, method 4: the write-up this lab starts from measured it
    OWN_CODE = 1  # a strategy written in the job's own code
    LIBRARY = 2  # a third-party library to add and keep up to date


class Rule(DescribedStrEnum):
    """The ranking's rules, applied in this order; the first that tells two qualifiers apart ranks them."""

    SERVICES = ("fewest services", "the fewest services to run and keep in step: its lock, fence and writes in one "
                "store before a second service")
    COST = ("cost", "the lower measured cost per company; a difference inside both figures' min–max spread decides "
            "nothing, and a measured cost ranks before one not measured")
    STRENGTH = ("strength", "the stronger evidence: the lower 95 % bound of its weakest deciding ✓")
    ADOPTION = ("least to adopt", "the least to adopt: the post's own fix (method 4), then a strategy written in your "
                "own code, then a third-party library to add and keep up to date")
    NAME = ("name", "nothing measured tells them apart: named in order of name")

    @property
    def sentence(self) -> str:
        return self.__doc__ or ""


RULES_TEXT = "; then ".join(f"{i}. {rule.sentence}" for i, rule in enumerate(Rule, 1))


@dataclass(frozen=True)
class Comparison:
    """The candidates' standings over the fault columns at least one of them faced (not n/a for all).

    services: how many services each candidate's lock, fence and writes take; costs: each one's cost per company;
    adoption: what adopting each takes (Adoption), by its declarations."""

    standings: dict[str, Standing]
    services: dict[str, int] = field(default_factory=dict)
    costs: dict[str, CompanyCost | None] = field(default_factory=dict)
    adoption: dict[str, Adoption] = field(default_factory=dict)

    @property
    def faced(self) -> int:
        return len(next(iter(self.standings.values())).cells) if self.standings else 0

    @cached_property
    def failed_by(self) -> dict[str, list[str]]:
        """Fault label -> the candidates it failed, in column order."""
        out: dict[str, list[str]] = {}
        for s in self.standings.values():
            for label in s.faults(Outcome.FAILED):
                out.setdefault(label, []).append(s.backend)
        labels = list(next(iter(self.standings.values())).cells) if self.standings else []
        return {label: out[label] for label in labels if label in out}

    def rivals_failed(self, backend: str) -> list[str]:
        """The faults that failed another candidate, in column order."""
        return [label for label, failed in self.failed_by.items() if any(b != backend for b in failed)]

    def unproven(self, backend: str) -> list[str]:
        """The faults that failed another candidate where this one shows no answer to it: not a ✓, ◆, unaffected or
        n/a (a ○ without a declared reason, unknown, not run, errored)."""
        s = self.standings[backend]
        return [label for label in self.rivals_failed(backend)
                if outcome_of(s.cells[label]) not in ANSWERS_A_RIVALS_FAILURE]

    def qualifies(self, backend: str) -> bool:
        s = self.standings[backend]
        return not s.count(Outcome.FAILED) and s.count(Outcome.KEPT) > 0 and not self.unproven(backend)

    def deciding(self, backend: str) -> list[str]:
        """Its ✓ cells under faults that failed a rival: the evidence that decides; where no rival failed anything,
        every ✓ it has."""
        s = self.standings[backend]
        rivals = self.rivals_failed(backend)
        kept = s.faults(Outcome.KEPT)
        return [label for label in kept if label in rivals] or kept

    def weakest(self, backend: str) -> tuple[str, Cell] | None:
        """Its weakest deciding ✓ (the highest bound), or None."""
        return self.standings[backend].weakest(self.deciding(backend))

    def bound(self, backend: str) -> float:
        weakest = self.weakest(backend)
        return 1.0 if weakest is None else (weakest[1].bound or 1.0)

    def weak(self, backend: str) -> bool:
        return self.bound(backend) > STRONG_AT_MOST

    # --- the ranking ------------------------------------------------------------------------------------------

    def _cost_rank(self, backend: str, group: list[str]) -> float:
        """0 for a cost as low as the cheapest of its group within their spreads; else its median; unmeasured last."""
        mine = self.costs.get(backend)
        if mine is None:
            return float("inf")
        measured = [c for b in group if (c := self.costs.get(b)) is not None]
        cheapest = min(measured, key=lambda c: c.key)
        return 0.0 if mine.overlaps(cheapest) else mine.key

    def rank_key(self, backend: str, fit: list[str]) -> tuple:
        services = self.services.get(backend, 0)
        group = [b for b in fit if self.services.get(b, 0) == services]
        return (services, self._cost_rank(backend, group), self.bound(backend),
                self.adoption.get(backend, Adoption.LIBRARY), backend)

    def ranked(self) -> list[Standing]:
        """The qualifying candidates, best first, by Rule in order."""
        fit = [b for b in self.standings if self.qualifies(b)]
        return [self.standings[b] for b in sorted(fit, key=lambda b: self.rank_key(b, fit))]

    def separated_by(self, first: str, second: str) -> Rule:
        """The first rule that tells two qualifiers apart."""
        fit = [s.backend for s in self.ranked()]
        a, b = self.rank_key(first, fit), self.rank_key(second, fit)
        for rule, i in ((Rule.SERVICES, 0), (Rule.COST, 1), (Rule.STRENGTH, 2), (Rule.ADOPTION, 3)):
            if a[i] != b[i]:
                return rule
        return Rule.NAME

    def closest(self) -> Standing | None:
        """Where none qualifies: the candidate nearest to qualifying: the fewest faults failed, then the fewest left
        unproven, then the most kept (one that never failed is closer than one that did, however much it kept)."""
        return min(self.standings.values(), key=lambda s: (s.count(Outcome.FAILED), len(self.unproven(s.backend)),
                                                           -s.count(Outcome.KEPT), s.backend), default=None)


def compare(rows: dict[str, dict[str, Cell]], candidates: list[str], services: dict[str, int] | None = None,
            costs: dict[str, CompanyCost | None] | None = None, adoption: dict[str, Adoption] | None = None) -> Comparison:
    """The candidates' standings over the fault columns at least one of them faced; rows: backend -> label -> cell."""
    labels = list(next(iter(rows.values()), {}))
    faced = [label for label in labels
             if any(outcome_of(rows[b][label]) is not Outcome.NOT_APPLICABLE for b in candidates)]
    return Comparison({b: Standing(b, {label: rows[b][label] for label in faced}) for b in candidates},
                      {b: n for b, n in (services or {}).items() if b in candidates},
                      {b: (costs or {}).get(b) for b in candidates},
                      {b: n for b, n in (adoption or {}).items() if b in candidates})
