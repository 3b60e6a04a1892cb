"""How hard the lab looked: what the run's added trials did (lab run --settle), from its meta.json, in one line.

A run that settled says how many cells got trials added, how many trials that took, within what budget, and how
each cell's settling ended (its first failure found, its ✓ at the declared bound, a changed cell's rate stated,
never exercised, the budget spent first), so a reader knows which ✓ rest on the planned trials alone.
"""

from __future__ import annotations

from collections import Counter

ENDED_ORDER = ("failure found", "bound reached", "rate stated", "never exercised", "at most reached", "budget spent")


def settled_line(meta: dict) -> str | None:
    """'Trials were added to 31 cells ...', or None for a run that did not settle."""
    settle = meta.get("settle")
    if not isinstance(settle, dict) or not settle.get("scenarios"):
        return None
    cells = [cell for scenario in settle["scenarios"].values() for cell in scenario.get("cells") or ()]
    if not cells:
        return None
    added = sum(max(0, int(cell.get("finished", 0)) + int(cell.get("errors", 0))) for cell in cells)
    ended = Counter(cell.get("ended") for cell in cells)
    how = ", ".join(f"{ended[e]} {e}" for e in ENDED_ORDER if ended.get(e))
    spent, budget = settle.get("spent_s"), settle.get("budget_s")
    within = f" in {spent / 60:.1f} of {budget / 60:.0f} min" if spent is not None and budget else ""
    return f"`--settle` added {added} trials to {len(cells)} cells the answer depends on{within}: {how}."
