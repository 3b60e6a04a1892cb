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

from lab.harness.told import CHANNELS, first_after
from lab.report.common import md_table, ordered_backends
from lab.report.declared import faults_of
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
    promote: Comparison
    accepted: Comparison
    survived: Comparison
    heard: Comparison

    @classmethod
    def between(cls, scripted: Figures, managed: Figures) -> Differences:
        return cls(compare(scripted.promote_s, managed.promote_s, PROMOTE_TOLERANCE),
                   compare(scripted.accepted, managed.accepted, ACCEPTED_TOLERANCE),
                   compare(scripted.survived, managed.survived, SURVIVED_TOLERANCE),
                   compare_heard(scripted.heard, managed.heard))

    def named(self) -> list[tuple[str, Comparison]]:
        return [("time to promote", self.promote), ("writes the old primary accepted", self.accepted),
                ("surviving writes", self.survived), ("what the holder heard first", self.heard)]

    def sentence(self) -> str:
        """'differs in time to promote and what the holder heard first; the same in ...; within noise in ...'."""
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


def _figure_row(label: str, figures: Figures) -> list[str]:
    never = f", never {figures.never_promoted}" if figures.never_promoted else ""
    return [label, figures.manager, spread(figures.promote_s, " s") + never, spread(figures.accepted, "", 0),
            spread(figures.accepting_s, " s"), spread(figures.survived, "", 0), heard_cell(figures.heard)]


def _pair_section(run: RunView, managed: str, managed_title: str, control: str, control_title: str) -> str | None:
    managed_trials, control_trials = promoted_trials(run, managed), promoted_trials(run, control)
    if not managed_trials or not control_trials:
        return None
    rows = [_figure_row(f"{control} (all variants)", Figures.of(control_trials))]
    variants = list(dict.fromkeys(r["variant"] for r in managed_trials))
    rows += [_figure_row(f"{managed} {variant}", Figures.of([r for r in managed_trials if r["variant"] == variant]))
             for variant in variants]
    by_backend = []
    frame = run.frame
    backends = ordered_backends(frame[frame.scenario.isin([managed, control])])
    for backend in backends:
        mine = [r for r in managed_trials if r["backend"] == backend]
        theirs = [r for r in control_trials if r["backend"] == backend]
        if not mine or not theirs:
            continue
        scripted, manager = Figures.of(theirs), Figures.of(mine)
        differences = Differences.between(scripted, manager)
        by_backend.append([backend, f"{spread(scripted.promote_s, ' s')} / {spread(manager.promote_s, ' s')}",
                           f"{spread(scripted.accepted, '', 0)} / {spread(manager.accepted, '', 0)}",
                           f"{spread(scripted.survived, '', 0)} / {spread(manager.survived, '', 0)}",
                           f"{heard_cell(scripted.heard)} / {heard_cell(manager.heard)}", differences.sentence()])
    overall = Differences.between(Figures.of(control_trials), Figures.of(managed_trials))
    return "\n".join([
        f"### {managed_title} beside {control_title}", "",
        f"`{managed}` against its scripted control `{control}`, from each trial's promotion measures: seconds from "
        "the fault until the new primary answered as one (read over its own protocol), the probe writes a client "
        "connected straight to the old primary got acknowledged after the fault struck (and for how long), how "
        "many of those the primary held at the end, and the first thing the holder's process heard once the "
        "fault struck. Medians with min-max and the number of trials, over every backend.", "",
        md_table(["trials", "manager", "time to promote", "old primary accepted", "accepting for",
                  "of those survived", "holder heard first"], rows), "",
        f"Over every backend and variant, {managed} {overall.sentence()}.", "",
        "Per backend, scripted / managed, every variant pooled:", "",
        md_table(["backend", "time to promote", "old primary accepted", "survived", "holder heard first",
                  "where they differ"], by_backend), "",
        f"*Same* and *differs* are computed: time to promote differs when the medians are more than "
        f"{_tolerance(PROMOTE_TOLERANCE, ' s')} apart and the two ranges do not overlap, and is the same within "
        f"that (else *within noise*); writes accepted likewise with {_tolerance(ACCEPTED_TOLERANCE, ' writes')}, "
        f"writes that survived with {_tolerance(SURVIVED_TOLERANCE, ' write')}; what the holder heard first is the "
        "same when the most common first signal of each side agrees.", ""])


def _tolerance(tolerance: tuple[float, float], unit: str) -> str:
    absolute, relative = tolerance
    return f"{absolute:g}{unit}" + (f" or {relative:.0%} of the larger" if relative else "")


@section(35)
def section_managed_beside_scripted(run: RunView) -> str | None:
    ran = set(run.frame.scenario)
    declared = {f.scenario: f for f in faults_of(run.meta)}
    parts = []
    for fault in declared.values():
        if fault.control is None or fault.scenario not in ran or fault.control not in ran:
            continue
        control = declared.get(fault.control)
        text = _pair_section(run, fault.scenario, fault.title, fault.control,
                             control.title if control is not None else fault.control)
        if text is not None:
            parts.append(text)
    if not parts:
        return None
    return "\n".join(["## Managed failover beside the scripted one", "",
                      "A failover by hand promotes at once and leaves the old primary alone; a cluster manager "
                      "waits, elects, and demotes the old primary when it can reach it. Each managed scenario is "
                      "set beside the scripted one it names as its control, on the same backends.", "", *parts])
