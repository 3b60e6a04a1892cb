"""Trial records grouped into one outcome line per (scenario, backend, variant), and the typed words for them.

`Safety` is the one vocabulary for whether a trial kept the lock's promise; `safety_of`,
`exercised_of` and `handover_of` read it from a record, treating a field an older run did not
write as unknown (None). `RunOrder` orders scenarios, backends and variants from the run's
meta.json when it says, and from the registries only when it does not.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum


class Safety(str, Enum):
    """Whether a trial kept the lock's one job: no other run in while the holder still believed it held."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    UNKNOWN = "unknown"


# Calibration measures detection of a killed lock session: every verdict there is a lost lock
# (late or never detected is worse, not better), so an older run without `safety` reads as unsafe.
CALIBRATION_LOST = {"within one poll", "late", "not detected"}


def safety_of(record: dict) -> Safety:
    """The record's `safety`; on a run that predates it, derived from the verdict."""
    recorded = record.get("safety")
    if isinstance(recorded, str):  # a frame row of an older run holds NaN here
        try:
            return Safety(recorded)
        except ValueError:
            return Safety.UNKNOWN
    # Imported here, so that the checkers can import Safety from this module.
    from lab.checkers import is_violation

    verdict = record.get("verdict")
    if verdict is None:
        return Safety.UNKNOWN
    if record.get("scenario") == "calibrate" and verdict in CALIBRATION_LOST:
        return Safety.UNSAFE
    return Safety.UNSAFE if is_violation(verdict) else Safety.SAFE


def exercised_of(record: dict) -> bool | None:
    """Whether the fault took the lock (or the write's session) away: True, False, or None (not known)."""
    value = record.get("exercised")
    if isinstance(value, bool):
        return value
    struck = (record.get("measures") or {}).get("struck")  # kill points: a schedule whose fault struck
    if isinstance(struck, int) and not isinstance(struck, bool):
        return struck > 0
    return None


def handover_of(measures: dict) -> Safety | None:
    """A timing trial's overlap: UNSAFE (holder still believed it held), SAFE (handed over after it ended),
    UNKNOWN (overlapped on a run that did not record how), None (no overlap)."""
    if measures.get("first_got_at") is None:
        return None
    value = measures.get("handover")
    if value is None:
        return Safety.UNKNOWN
    try:
        return Safety(value)
    except ValueError:
        return Safety.UNKNOWN


@dataclass(frozen=True)
class OutcomeRow:
    scenario: str
    backend: str
    variant: str
    case: str | None
    outcome: str  # e.g. "lost 3/3", "held 2/3, lost 1/3", "n/a: needs session_lock ..."


@dataclass(frozen=True)
class RunOrder:
    """Scenarios, backends and variants in the order the run's meta.json gives, else the registries'."""

    backends: tuple[str, ...] | None = None
    scenarios: tuple[str, ...] | None = None
    variants: dict = field(default_factory=dict, hash=False, compare=False)
    capabilities: dict = field(default_factory=dict, hash=False, compare=False)

    @classmethod
    def of(cls, meta: dict | None) -> RunOrder:
        meta = meta or {}
        backend_order, scenario_order = meta.get("backend_order"), meta.get("scenario_order")
        return cls(tuple(backend_order) if backend_order else None,
                   tuple(scenario_order) if scenario_order else None,
                   {s: tuple(v) for s, v in (meta.get("variants") or {}).items()},
                   {b: frozenset(c) for b, c in (meta.get("capabilities") or {}).items()})

    def backend_key(self, name: str) -> tuple:
        if self.backends is not None and name in self.backends:
            return (0, self.backends.index(name), "")
        return (1, *_registry_backend_rank(name))

    def scenario_key(self, name: str) -> tuple:
        names = self.scenarios if self.scenarios is not None else _registry_scenarios()
        return (names.index(name), "") if name in names else (len(names), name)

    def variant_key(self, scenario: str, variant: str) -> tuple:
        declared = self.variants.get(scenario)
        if declared is None:
            declared = _declared_variants(scenario)
        return (declared.index(variant) if variant in declared else len(declared), variant)

    def record_key(self, record: dict) -> tuple:
        """Sort key: scenario, backend, variant, trial index."""
        return (self.scenario_key(record["scenario"]), self.backend_key(record["backend"]),
                self.variant_key(record["scenario"], record["variant"]), record["index"])

    def capabilities_of(self, backend: str) -> frozenset[str]:
        if backend in self.capabilities:
            return self.capabilities[backend]
        return _registry_capabilities(backend)


def _registry_backend_rank(name: str) -> tuple:
    import backends

    return backends.rank(name)


@functools.lru_cache(maxsize=None)
def _registry_scenarios() -> tuple[str, ...]:
    import scenarios

    return tuple(scenarios.names())


@functools.lru_cache(maxsize=None)
def _declared_variants(scenario: str) -> tuple[str, ...]:
    try:
        import scenarios

        return tuple(scenarios.REGISTRY.load(scenario).variants)
    except Exception:  # a scenario from an older run that no longer exists: alphabetical will do
        return ()


@functools.lru_cache(maxsize=None)
def _registry_capabilities(backend: str) -> frozenset[str]:
    try:
        import backends

        return frozenset(backends.load(backend).capabilities)
    except Exception:  # not installed here, or gone: nothing known
        return frozenset()


def latest_per_trial(trials: list[dict]) -> list[dict]:
    """The last record of each trial id (a resumed run may have re-run an errored trial)."""
    last = {}
    for record in trials:
        last[record["id"]] = record
    return list(last.values())


def registry_order(record: dict) -> tuple:
    """Sort key from the registries alone (a run without order in its meta.json)."""
    return RunOrder().record_key(record)


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


def outcome_rows(trials: list[dict], meta: dict | None = None) -> list[OutcomeRow]:
    order = RunOrder.of(meta)
    groups: dict[tuple, list[dict]] = {}
    for record in sorted(latest_per_trial(trials), key=order.record_key):
        groups.setdefault((record["scenario"], record["backend"], record["variant"]), []).append(record)
    rows = []
    for (scenario, backend, variant), records in groups.items():
        case = next((r["measures"].get("case") for r in records if r.get("measures")), None)
        rows.append(OutcomeRow(scenario, backend, variant, case, outcome_text(records)))
    return rows
