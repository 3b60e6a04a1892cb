"""A managed failover beside its scripted control: how long the promotion took, what the old primary went on
accepting, what the holder heard, and where the two differ.

Why: the scripted failovers (redis_failover's REPLICAOF NO ONE, failover's pg_promote) promote at once and
never touch the old primary; Sentinel and Patroni wait, elect, and demote it later or never, and that is where
locks are lost in the field. A scenario that is a managed failover names its scripted counterpart
(`control` in its fault declaration, recorded in meta.json); both record the same "promotion" measures
(manager, promote_s, old_primary_accepted, old_primary_accepting_s, old_primary_writes_survived) and the
holder's signals. This section reads only those, from the run's files.

Every "same" and "differs" is computed, with the tolerance stated beside the table: a figure differs when
the medians are further apart than the tolerance and the two ranges (min-max over the trials) do not
overlap, is the same when the medians are within the tolerance, and is within noise otherwise. What the
holder heard first is compared by its most common answer (the kind of signal and where it surfaced).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from enum import Enum

from lab.checkers.told import CHANNELS, first_after
from lab.report.common import md_table, ordered_backends
from lab.report.declared import control_of, faults_of
from lab.report.sections import RunView, section

# Tolerances: (absolute, relative to the larger median).
PROMOTE_TOLERANCE = (0.5, 0.25)  # seconds: a promotion read every 50 ms, on a shared 2-core machine
ACCEPTED_TOLERANCE = (5.0, 0.25)  # probe writes (one every 100 ms): half a second of writes, or a quarter
SURVIVED_TOLERANCE = (1.0, 0.0)  # probe writes: one write either way


class Comparison(str, Enum):
    SAME = "same"
    DIFFERS = "differs"
    WITHIN_NOISE = "within noise"  # the medians are apart, the trials' ranges are not
    NOT_MEASURED = "not measured"  # one side has no trial with the figure


@dataclass(frozen=True)
class Figures:
    """One side's figures for one backend (or for all): each a list over its trials."""

    promote_s: list[float]
    never_promoted: int
    accepted: list[float]
    survived: list[float]
    accepting_s: list[float]
    heard: list[str]  # per trial: the first thing the holder heard after the fault ("nothing" included)
    manager: str

    @classmethod
    def of(cls, records: list[dict]) -> Figures:
        promotions = [r["measures"]["promotion"] for r in records]
        return cls([p["promote_s"] for p in promotions if p["promote_s"] is not None],
                   sum(p["promote_s"] is None for p in promotions),
                   [float(p["old_primary_accepted"]) for p in promotions],
                   [float(p["old_primary_writes_survived"]) for p in promotions
                    if p["old_primary_writes_survived"] is not None],
                   [p["old_primary_accepting_s"] for p in promotions if p["old_primary_accepting_s"] is not None],
                   [heard_first(r["measures"]) for r in records],
                   ", ".join(sorted({p["manager"] for p in promotions})))


def heard_first(measures: dict) -> str:
    """What the holder heard first once the fault struck: 'an exception from release()', or 'nothing'."""
    signal = first_after(measures["holder"].get("signals", []), measures.get("fault_at", 0.0))
    return "nothing" if signal is None else f"{CHANNELS[signal['how']]} from {signal['via']}"


def compare(a: list[float], b: list[float], tolerance: tuple[float, float]) -> Comparison:
    """Same within the tolerance of the medians; differs beyond it when the ranges do not overlap."""
    if not a or not b:
        return Comparison.NOT_MEASURED
    ma, mb = statistics.median(a), statistics.median(b)
    absolute, relative = tolerance
    if abs(ma - mb) <= max(absolute, relative * max(abs(ma), abs(mb))):
        return Comparison.SAME
    if max(a) < min(b) or max(b) < min(a):
        return Comparison.DIFFERS
    return Comparison.WITHIN_NOISE


def most_common(labels: list[str]) -> set[str]:
    counts = Counter(labels)
    top = max(counts.values(), default=0)
    return {label for label, n in counts.items() if n == top}


def compare_heard(a: list[str], b: list[str]) -> Comparison:
    """Same when the two sides' most common first signals agree (either of tied ones), else differs."""
    if not a or not b:
        return Comparison.NOT_MEASURED
    return Comparison.SAME if most_common(a) & most_common(b) else Comparison.DIFFERS


def spread(values: list[float], unit: str = "", digits: int = 2) -> str:
    """'2.31 s (1.9-2.8, n=6)'; '-' for none."""
    if not values:
        return "-"
    mid = f"{statistics.median(values):.{digits}f}{unit}"
    if len(values) == 1:
        return f"{mid} (n=1)"
    return f"{mid} ({min(values):.{digits}f}-{max(values):.{digits}f}, n={len(values)})"


def heard_cell(labels: list[str]) -> str:
    counts = Counter(labels)
    return "; ".join(f"{label} {n}/{len(labels)}" for label, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass(frozen=True)
class Differences:
    """How one managed variant's promotion figures stand against the scripted control's."""

    promote: Comparison
    accepted: Comparison
    survived: Comparison

    @classmethod
    def between(cls, scripted: Figures, managed: Figures) -> Differences:
        return cls(compare(scripted.promote_s, managed.promote_s, PROMOTE_TOLERANCE),
                   compare(scripted.accepted, managed.accepted, ACCEPTED_TOLERANCE),
                   compare(scripted.survived, managed.survived, SURVIVED_TOLERANCE))

    def named(self) -> list[tuple[str, Comparison]]:
        return [("time to promote", self.promote), ("writes the old primary accepted", self.accepted),
                ("surviving writes", self.survived)]

    def sentence(self) -> str:
        """'differs in time to promote; the same in ...; within noise in ...'."""
        parts = []
        for word in (Comparison.DIFFERS, Comparison.SAME, Comparison.WITHIN_NOISE, Comparison.NOT_MEASURED):
            names = [name for name, c in self.named() if c is word]
            if names:
                lead = {Comparison.DIFFERS: "differs in", Comparison.SAME: "the same in",
                        Comparison.WITHIN_NOISE: "within noise in", Comparison.NOT_MEASURED: "not measured:"}[word]
                parts.append(f"{lead} {_join(names)}")
        return "; ".join(parts)


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def promoted_trials(run: RunView, scenario: str) -> list[dict]:
    """The scenario's finished trials that recorded the promotion measures."""
    frame = run.frame
    rows = frame[(frame.scenario == scenario) & (frame.status == "ok")]
    return [r for r in rows.to_dict("records") if "promotion" in (r["measures"] or {})]


def _figure_row(label: str, figures: Figures, against: str) -> list[str]:
    never = f", never {figures.never_promoted}" if figures.never_promoted else ""
    return [label, figures.manager, spread(figures.promote_s, " s") + never, spread(figures.accepted, "", 0),
            spread(figures.accepting_s, " s"), spread(figures.survived, "", 0), against]


def heard_mark(scripted: list[str], managed: list[str]) -> str:
    """The managed side's most common first signal, its count, and whether it is the scripted side's."""
    if not managed:
        return "-"
    top = sorted(most_common(managed))[0]
    return f"{top} {Counter(managed)[top]}/{len(managed)} ({compare_heard(scripted, managed).value})"


def _pair_section(run: RunView, managed: str, managed_title: str, control: str, control_title: str) -> str | None:
    managed_trials, control_trials = promoted_trials(run, managed), promoted_trials(run, control)
    if not managed_trials or not control_trials:
        return None
    scripted = Figures.of(control_trials)
    variants = list(dict.fromkeys(r["variant"] for r in managed_trials))
    of_variant = {v: [r for r in managed_trials if r["variant"] == v] for v in variants}
    rows = [_figure_row(f"{control}, every variant", scripted, "")]
    counted: Counter = Counter()
    for variant, trials in of_variant.items():
        differences = Differences.between(scripted, Figures.of(trials))
        counted.update(c for _, c in differences.named())
        rows.append(_figure_row(f"{managed} {variant}", Figures.of(trials), differences.sentence()))
    heard_rows, heard_differs, heard_cells = [], 0, 0
    frame = run.frame
    for backend in ordered_backends(frame[frame.scenario.isin([managed, control])]):
        theirs = [heard_first(r["measures"]) for r in control_trials if r["backend"] == backend]
        if not theirs:
            continue
        cells = []
        for trials in of_variant.values():
            mine = [heard_first(r["measures"]) for r in trials if r["backend"] == backend]
            cells.append(heard_mark(theirs, mine))
            if mine:
                heard_cells += 1
                heard_differs += compare_heard(theirs, mine) is Comparison.DIFFERS
        heard_rows.append([backend, heard_cell(theirs), *cells])
    return "\n".join([
        f"### {managed_title} beside {control_title}", "",
        f"`{managed}` against its scripted control `{control}`, from each trial's promotion measures, over every "
        "backend: seconds from the fault until the new primary answered as one (read over its own protocol), the "
        "probe writes a client connected straight to the old primary got acknowledged after the fault struck (and "
        "until when), and how many of those the primary held at the end. Medians with min-max and the number of "
        "trials; the last column says where each managed variant differs from the scripted failover.", "",
        md_table(["trials", "manager", "time to promote", "old primary accepted", "accepting until",
                  "of those survived", "against the scripted failover"], rows), "",
        f"Of the {sum(counted.values())} comparisons above, {_count(counted[Comparison.DIFFERS], 'differs', 'differ')}, "
        f"{_count(counted[Comparison.SAME], 'is the same', 'are the same')} and "
        f"{_count(counted[Comparison.WITHIN_NOISE], 'is within noise', 'are within noise')}.", "",
        "What the holder heard first once the fault struck, per backend: the scripted failover's answers, then each "
        "managed variant's most common one, *same* or *differs* from the scripted side's most common one.", "",
        md_table(["backend", f"{control} (scripted)", *[f"{managed} {v}" for v in variants]], heard_rows), "",
        f"The holder heard first something other than under the scripted failover in {heard_differs} of "
        f"{heard_cells} backend and variant cells.", "",
        f"*Same* and *differs* are computed: time to promote differs when the medians are more than "
        f"{_tolerance(PROMOTE_TOLERANCE, ' s')} apart and the two ranges do not overlap, and is the same within "
        f"that (else *within noise*); writes accepted likewise with {_tolerance(ACCEPTED_TOLERANCE, ' writes')}, "
        f"surviving writes with {_tolerance(SURVIVED_TOLERANCE, ' write')}; what the holder heard first is the same "
        "when the most common first signal of each side agrees (either of tied ones).", ""])


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _tolerance(tolerance: tuple[float, float], unit: str) -> str:
    absolute, relative = tolerance
    return f"{absolute:g}{unit}" + (f" or {relative:.0%} of the larger" if relative else "")


@section(35)
def section_managed_beside_scripted(run: RunView) -> str | None:
    ran = set(run.frame.scenario)
    declared = {f.scenario: f for f in faults_of(run.meta)}
    parts = []
    for fault in declared.values():
        named = control_of(run.meta, fault.scenario)
        if named is None or fault.scenario not in ran or named not in ran:
            continue
        control = declared.get(named)
        text = _pair_section(run, fault.scenario, fault.title, named, control.title if control is not None else named)
        if text is not None:
            parts.append(text)
    if not parts:
        return None
    return "\n".join(["## Managed failover beside the scripted one", "",
                      "A failover by hand promotes at once and leaves the old primary alone; a cluster manager "
                      "waits, elects, and demotes the old primary when it can reach it. Each managed scenario is "
                      "set beside the scripted one it names as its control, on the same backends.", "", *parts])
