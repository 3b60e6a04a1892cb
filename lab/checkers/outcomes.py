"""Trial records grouped into one outcome line per (scenario, backend, variant), and the typed words for them.

`Safety` is the one vocabulary for whether a trial kept the lock's promise; `safety_of`,
`exercised_of` and `handover_of` read it from a record, treating a field an older run did not
write as unknown (None). `RunOrder` orders scenarios, backends and variants from the run's
meta.json, and from the run's own files when an older meta.json does not say.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from lab.declarations.skips import DoesNotRun as DoesNotRun, NotRun as NotRun  # typed skip reasons: defined below every layer


class Safety(str, Enum):
    """Whether a trial kept the lock's one job: no other run in while the holder still believed it held."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    UNKNOWN = "unknown"
    # The lock was lost (another run got it while the holder still believed it held) but the trial wrote
    # nothing after that, so it cannot say whether the company would have stayed whole.
    UNTESTED = "untested"


def safety_of(record: dict) -> Safety:
    """The record's typed `safety` (every finished trial has carried one since the field came in);
    UNKNOWN for a record without it: the lab never derives it from the verdict's words."""
    recorded = record.get("safety")
    if isinstance(recorded, str):  # a frame row of a record without it holds NaN here
        try:
            return Safety(recorded)
        except ValueError:
            return Safety.UNKNOWN
    return Safety.UNKNOWN


class SkipKind(str, Enum):
    """Why a trial did not run, as its record says (`skip`)."""

    NOT_APPLICABLE = "n/a"  # the fault cannot reach the lock, its fence or its writes
    DOES_NOT_RUN = "does not run"  # this machine lacks what it needs (a package, a server ability)
    NOT_RUN = "not run"  # the lab cannot run the combination here: unknown, not immune


def skip_kind_of(reason: str) -> SkipKind:
    """The kind a skip reason was raised as (its type, never its words)."""
    if isinstance(reason, NotRun):
        return SkipKind.NOT_RUN
    if isinstance(reason, DoesNotRun):
        return SkipKind.DOES_NOT_RUN
    return SkipKind.NOT_APPLICABLE


def skip_of(record: dict) -> SkipKind:
    """A skipped record's kind: its typed `skip` field, or for a run that predates it, `runs_here` (False: does
    not run; otherwise n/a). The reason's words are never parsed."""
    recorded = record.get("skip")
    if isinstance(recorded, str):
        try:
            return SkipKind(recorded)
        except ValueError:
            pass
    return SkipKind.DOES_NOT_RUN if record.get("runs_here") is False else SkipKind.NOT_APPLICABLE


def does_not_run(record: dict) -> bool:
    """Whether a skipped record is 'does not run' (cannot work here) rather than n/a or not run."""
    return skip_of(record) is SkipKind.DOES_NOT_RUN


# Trial-record schemas this code reads: 1 (no `schema` field: verdicts written by each scenario, in words)
# and 2 (lab/checkers/ops.py: a history and a typed judgement on every judged trial).
SCHEMAS = (1, 2)


def schema_of(record: dict) -> int:
    """A record's schema, as the record declares it (absent: 1, the schema before it was declared)."""
    value = record.get("schema")
    return 1 if value is None or value != value else int(value)  # NaN: a frame row of a schema-1 record


def judgement_of(record: dict) -> dict | None:
    """The typed verdict of a schema-2 judged trial, or None (a schema-1 record, or a trial that measures cost)."""
    value = record.get("judgement")
    return value if schema_of(record) >= 2 and isinstance(value, dict) else None


def lock_lost(record: dict) -> bool:
    """Whether the checkers found another run in while the holder still believed it held (the judgement's
    `lock`). Only a judged trial says so: a record without a judgement (skipped, or a scenario that measures
    cost) found no lost lock, and its verdict's words are never parsed for one."""
    judgement = judgement_of(record)
    return judgement is not None and judgement["lock"] == "false"


def detection_of(record: dict) -> str | None:
    """How soon a killed lock session was seen free (calibrate, a kill): 'within one poll', 'late', 'not detected',
    from the checkers' judgement; None for a record without one."""
    judgement = judgement_of(record)
    return None if judgement is None else (judgement.get("figures") or {}).get("detection")


def exercised_of(record: dict) -> bool | None:
    """Whether the fault took the lock (or the write's session) away: True, False, or None (not known)."""
    value = record.get("exercised")
    if isinstance(value, bool):
        return value
    struck = (record.get("measures") or {}).get("struck")  # kill points: a schedule whose fault struck
    if isinstance(struck, int) and not isinstance(struck, bool):
        return struck > 0
    return None


def handover_of(measures: dict, judgement: dict | None = None) -> Safety | None:
    """A timing trial's overlap: None when nobody got in; else, from the checkers' judgement (schema 2),
    UNTESTED for a lock lost while the holder still believed it held (a timing trial writes nothing) and
    SAFE for a lock taken from a write that rolled back; from a schema-1 run's own `handover`, UNSAFE or
    SAFE; UNKNOWN when the run recorded neither."""
    if measures.get("first_got_at") is None:
        return None
    if isinstance(judgement, dict):
        return Safety(judgement["safety"])
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
    """Scenarios, backends and variants in the order the run's meta.json gives.

    A run whose meta.json predates that order falls back on the run's own files: scenarios and
    variants in the order their first trial was written (the order the run executed them),
    backends by name, no capabilities known. Nothing here consults today's registries, so a
    saved run renders the same from a checkout where its backends no longer exist.
    """

    backends: tuple[str, ...] | None = None
    scenarios: tuple[str, ...] = ()
    variants: dict = field(default_factory=dict, hash=False, compare=False)
    capabilities: dict = field(default_factory=dict, hash=False, compare=False)

    @classmethod
    def of(cls, meta: dict | None, trials: Sequence[dict] = ()) -> RunOrder:
        meta = meta or {}
        seen_scenarios: list[str] = []
        seen_variants: dict[str, list] = {}
        for record in trials:  # first appearance: the order in which the run wrote them
            if record["scenario"] not in seen_scenarios:
                seen_scenarios.append(record["scenario"])
            of_scenario = seen_variants.setdefault(record["scenario"], [])
            if record["variant"] not in of_scenario:
                of_scenario.append(record["variant"])
        scenario_order = list(meta.get("scenario_order") or [])
        scenario_order += [s for s in seen_scenarios if s not in scenario_order]
        variants = {s: tuple(v) for s, v in seen_variants.items()}
        variants.update({s: tuple(v) for s, v in (meta.get("variants") or {}).items()})
        backend_order = meta.get("backend_order")
        return cls(tuple(backend_order) if backend_order else None, tuple(scenario_order), variants,
                   {b: frozenset(c) for b, c in (meta.get("capabilities") or {}).items()})

    def backend_key(self, name: str) -> tuple:
        if self.backends is not None and name in self.backends:
            return (0, self.backends.index(name), "")
        return (1, 0, name)

    def scenario_key(self, name: str) -> tuple:
        names = self.scenarios
        return (names.index(name), "") if name in names else (len(names), name)

    def variant_key(self, scenario: str, variant: str) -> tuple:
        declared = self.variants.get(scenario, ())
        return (declared.index(variant) if variant in declared else len(declared), variant)

    def record_key(self, record: dict) -> tuple:
        """Sort key: scenario, backend, variant, trial index."""
        return (self.scenario_key(record["scenario"]), self.backend_key(record["backend"]),
                self.variant_key(record["scenario"], record["variant"]), record["index"])

    def capabilities_of(self, backend: str) -> frozenset[str]:
        return self.capabilities.get(backend, frozenset())


def latest_per_trial(trials: list[dict]) -> list[dict]:
    """The last record of each trial id (a resumed run may have re-run an errored trial)."""
    last = {}
    for record in trials:
        last[record["id"]] = record
    return list(last.values())


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


def outcome_groups(trials: list[dict], meta: dict | None = None) -> dict[tuple, list[dict]]:
    """(scenario, backend, variant) -> its latest trial records, in the run's order."""
    order = RunOrder.of(meta, trials)
    groups: dict[tuple, list[dict]] = {}
    for record in sorted(latest_per_trial(trials), key=order.record_key):
        groups.setdefault((record["scenario"], record["backend"], record["variant"]), []).append(record)
    return groups


def findings(records: list[dict]) -> frozenset[str]:
    """What a cell found, counts aside: its verdicts, and whether it errored or did not apply."""
    found = {r["verdict"] for r in records if r["status"] == "ok"}
    if any(r["status"] == "error" for r in records):
        found.add("error")
    if not found and any(r["status"] == "skipped" for r in records):
        found.add("n/a")
    return frozenset(found)


def outcome_rows(trials: list[dict], meta: dict | None = None) -> list[OutcomeRow]:
    rows = []
    for (scenario, backend, variant), records in outcome_groups(trials, meta).items():
        case = next((r["measures"].get("case") for r in records if r.get("measures")), None)
        rows.append(OutcomeRow(scenario, backend, variant, case, outcome_text(records)))
    return rows
