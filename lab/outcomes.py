"""Trial records grouped into one outcome line per (scenario, backend, variant)."""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass

import backends
import scenarios


@dataclass(frozen=True)
class OutcomeRow:
    scenario: str
    backend: str
    variant: str
    case: str | None
    outcome: str  # e.g. "lost 3/3", "held 2/3, lost 1/3", "n/a: needs session_lock ..."


def latest_per_trial(trials: list[dict]) -> list[dict]:
    """The last record of each trial id (a resumed run may have re-run an errored trial)."""
    last = {}
    for record in trials:
        last[record["id"]] = record
    return list(last.values())


def registry_order(record: dict) -> tuple:
    """Sort key: scenarios and backends in registry order, then variant and trial index."""

    def position(names: list[str], name: str) -> int:
        return names.index(name) if name in names else len(names)

    scenario = record["scenario"]
    variants = list(_declared_variants(scenario))
    return (position(scenarios.names(), scenario), backends.rank(record["backend"]),
            position(variants, record["variant"]), record["variant"], record["index"])


@functools.lru_cache(maxsize=None)
def _declared_variants(scenario: str) -> tuple[str, ...]:
    try:
        return tuple(scenarios.REGISTRY.load(scenario).variants)
    except Exception:  # a scenario from an older run that no longer exists: alphabetical will do
        return ()


def outcome_text(records: list[dict]) -> str:
    """'lost 3/3' / 'held 2/3, lost 1/3' / 'n/a: reason' / 'error 1/3: reason'."""
    n = len(records)
    ok = Counter(r["verdict"] for r in records if r["status"] == "ok")
    parts = [f"{verdict} {count}/{n}" for verdict, count in sorted(ok.items(), key=lambda kv: (-kv[1], kv[0]))]
    skipped = [r for r in records if r["status"] == "skipped"]
    errors = [r for r in records if r["status"] == "error"]
    if skipped and not ok:
        parts.append(f"n/a: {skipped[0]['reason']}")
    if errors:
        parts.append(f"error {len(errors)}/{n}: {errors[0]['reason']}")
    return ", ".join(parts)


def outcome_rows(trials: list[dict]) -> list[OutcomeRow]:
    groups: dict[tuple, list[dict]] = {}
    for record in sorted(latest_per_trial(trials), key=registry_order):
        groups.setdefault((record["scenario"], record["backend"], record["variant"]), []).append(record)
    rows = []
    for (scenario, backend, variant), records in groups.items():
        case = next((r["measures"].get("case") for r in records if r.get("measures")), None)
        rows.append(OutcomeRow(scenario, backend, variant, case, outcome_text(records)))
    return rows
