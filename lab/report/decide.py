"""The report's first screen: for each need, the locks these trials say keep the company whole, and those to avoid.

Every line is computed from the matrix cells (lab/report/matrix.py) and the run's declarations in
meta.json (capabilities, lock service, one-line summaries): a need selects locks by what they declare,
never by name, so a plugin lands where it qualifies. A lock qualifies for a need when no trial of it
failed (✗), lost its lock with no write to judge (⚠) or left safety unknown (?), and at least one
fault took its right away while the company stayed whole (✓, exercised). Where no lock qualifies,
the page says so.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from lab.capabilities import Capability
from lab.post_role import PostRole
from lab.where import DATABASES
from lab.report.common import backend_with_role, declaration, ordered_backends
from lab.report.matrix import Cell, Mark, columns_run, fault_records, judge
from lab.report.sections import RunView, section

HELD_ACROSS_WRITES = frozenset({Capability.SESSION_LOCK, Capability.LEASE_EXPIRY,
                                Capability.CONNECTION_HELD})  # as Backend.holds_across_writes


@dataclass(frozen=True)
class Need:
    """A need an engineer comes with, and which declared locks can serve it at all."""

    title: str
    serves: Callable[[frozenset, str | None], bool]  # (capabilities, lock service) -> can it serve the need
    why: str  # what a lock must do for it, in one line


NEEDS = [
    Need("One writer per company, every write in PostgreSQL",
         lambda caps, service: service == "postgres",
         "the lock lives in the database the writes go to"),
    Need("One writer per company, every write in MariaDB",
         lambda caps, service: service == "mariadb",
         "the lock lives in the MariaDB the writes go to"),
    Need("A run-level lock held across many transactions",
         lambda caps, service: bool(HELD_ACROSS_WRITES & caps),
         "one right for the whole run, held between its per-company transactions"),
    Need("Writes outside PostgreSQL (no fence the storage can check)",
         lambda caps, service: bool(HELD_ACROSS_WRITES & caps) and Capability.FENCING not in caps,
         "the lock alone must keep a lapsed holder from writing"),
    Need("A lock service you already run (Redis, etcd)",
         lambda caps, service: service is not None and service not in DATABASES,
         "the lock lives in Redis or etcd"),
]


@dataclass(frozen=True)
class Standing:
    """A backend's matrix cells, arranged for a decision: labels of the faults in each state, and trial counts."""

    backend: str
    kept: tuple[str, ...]  # ✓ with the fault exercised
    failed: tuple[tuple[str, Cell], ...]  # ✗, with the cell (its words and counts)
    doubtful: tuple[str, ...]  # ⚠ lost with no write judged, or ? unknown
    not_exercised: tuple[str, ...]
    trials: int  # ok trials behind the exercised ✓ cells

    @property
    def qualifies(self) -> bool:
        return bool(self.kept) and not self.failed and not self.doubtful


def standing(frame: pd.DataFrame, backend: str, columns: list[tuple[tuple[str, str], str]]) -> Standing:
    kept, failed, doubtful, idle, trials = [], [], [], [], 0
    for (scenario, variant), label in columns:
        records = fault_records(frame, backend, scenario, variant)
        cell = judge(records)
        if cell.mark is Mark.FAILED:
            failed.append((label, cell))
        elif cell.mark in (Mark.LOST, Mark.UNKNOWN):
            doubtful.append(label)
        elif cell.mark is Mark.NOT_EXERCISED:
            idle.append(label)
        elif cell.mark is Mark.KEPT and cell.exercised:
            kept.append(label)
            trials += cell.exercised
    return Standing(backend, tuple(kept), tuple(failed), tuple(doubtful), tuple(idle), trials)


def can_serve(need: Need, meta: dict, backend: str) -> bool:
    """Whether a backend can serve a need at all, by what the run's meta.json says it declares."""
    return need.serves(frozenset(declaration(meta, "capabilities", backend) or ()),
                       declaration(meta, "lock_service", backend))


def acquire_cost(frame: pd.DataFrame, backend: str) -> str | None:
    """Its acquire + release, median, from the latency scenario when this run measured it."""
    rows = frame[(frame.scenario == "latency") & (frame.status == "ok") & (frame.backend == backend)]
    figures = [m["acquire_release"].get("p50") for m in rows.measures if (m.get("acquire_release") or {}).get("p50")]
    return None if not figures else f"{figures[-1] * 1000:.2f} ms"


def company_seconds(frame: pd.DataFrame, backend: str) -> tuple[float, int, int] | None:
    """A backend's one-worker, one-transaction-per-company rebuild from the cost table: (median seconds per
    company, companies, repetitions), or None when the run did not time it."""
    rows = frame[(frame.scenario == "perf") & (frame.status == "ok") & (frame.backend == backend)]
    per_company = [m for m in rows.measures
                   if m.get("workers") == 1 and m.get("transactions") == m.get("companies") and not m.get("failed")
                   and "COPY" not in str(m.get("config"))]
    if not per_company:
        return None
    return (statistics.median(m["seconds"] / m["companies"] for m in per_company), per_company[0]["companies"],
            len(per_company))


def cost_sentence(frame: pd.DataFrame, meta: dict, backend: str) -> str:
    """What the lock costs: per company where it is taken in each company's transaction, per run where it is
    held across them, and what a company's transaction costs with no lock, where the run timed them."""
    caps = frozenset(declaration(meta, "capabilities", backend) or ())
    no_lock = backend_with_role(frame, PostRole.NO_LOCK)
    bare = company_seconds(frame, no_lock) if no_lock else None  # the same transaction with no lock
    base = f"{bare[0] * 1000:.2f} ms without a lock" if bare else None
    timed = sorted(set(frame[(frame.scenario == "perf") & (frame.status == "ok")].backend) - {no_lock})
    if HELD_ACROSS_WRITES & caps:
        cost = acquire_cost(frame, backend)
        per_run = f" Acquire + release {cost}, median, once per run" if cost else " Taken once per run"
        return per_run + (f"; nothing per company on top of its transaction ({base})." if base else ".")
    mine = company_seconds(frame, backend)
    if mine is not None:
        against = f" against {base}" if base else ""
        return (f" Per company: its transaction took {mine[0] * 1000:.2f} ms with the lock{against} (cost table, "
                f"{mine[1]:,} companies, median of {mine[2]}).")
    if timed:
        return f" Per company: not timed here (the cost table times {', '.join(f'`{b}`' for b in timed)})."
    return ""


def candidate_line(s: Standing, meta: dict, frame: pd.DataFrame) -> str:
    summary = declaration(meta, "summaries", s.backend)
    what = f": {summary}" if summary else ""
    idle = f"; not exercised by {len(s.not_exercised)} more" if s.not_exercised else ""
    return (f"- `{s.backend}`{what}. Kept the company whole under all {len(s.kept)} faults that took its right "
            f"away ({s.trials} trials){idle}.{cost_sentence(frame, meta, s.backend)}")


def avoid_line(s: Standing) -> str:
    """The first fault that rules it out with its trials, how many more do, and where it lost the lock with no
    write to judge, by name (semicolons: a fault's name may hold a comma)."""
    label, cell = s.failed[0]
    more = f"; and under {len(s.failed) - 1} more" if len(s.failed) > 1 else ""
    lost = "; ".join(f"*{d}*" for d in s.doubtful)
    doubtful = f"; it lost the lock (no write judged) or left safety unknown under {lost}" if lost else ""
    return f"- `{s.backend}`: {cell.text.removeprefix('✗ ')} under *{label}*{more}{doubtful}."


@section(10)
def section_decide(run: RunView) -> str | None:
    frame, meta = run.frame, run.meta
    backends = [b for b in ordered_backends(frame) if "@" not in b]  # the driver rows have a table of their own
    if not backends:
        return None
    columns = columns_run(run)
    standings = {b: standing(frame, b, columns) for b in backends}
    out = ["## Which lock, for which need", "",
           "Decided from this run's trials. A lock qualifies for a need when it can serve it by what it declares, "
           "no trial of it failed (✗), lost its lock with no write to judge (⚠) or left safety unknown (?), and "
           "at least one fault took its right away while the company stayed whole (✓). Each line counts the "
           "exercised faults and the trials behind them; the matrix below has every cell.", ""]
    for need in NEEDS:
        able = [b for b in backends if can_serve(need, meta, b)]
        if not able:
            continue
        fit = sorted((standings[b] for b in able if standings[b].qualifies),
                     key=lambda s: (-len(s.kept), -s.trials, s.backend))
        out += [f"**{need.title}** ({need.why}):", ""]
        if fit:
            out += [candidate_line(s, meta, frame) for s in fit]
        else:
            best = max((standings[b] for b in able), key=lambda s: (len(s.kept), -len(s.failed), s.backend))
            out.append(f"- No lock measured here qualifies. Closest: `{best.backend}`, kept whole under "
                       f"{len(best.kept)} exercised faults but "
                       + (f"failed under {len(best.failed)} (" + "; ".join(f"*{label}*" for label, _ in best.failed)
                          + ")" if best.failed else
                          f"lost its lock or left safety unknown under {len(best.doubtful)}") + ".")
        out.append("")
    avoid = [standings[b] for b in backends if standings[b].failed]
    if avoid:
        out += ["**Do not use** (the first fault that rules each out, with its trials; the matrix has every cell):", "",
                *[avoid_line(s) for s in avoid], ""]
    return "\n".join(out)
