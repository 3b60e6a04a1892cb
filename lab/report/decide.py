"""The report's first screen: for each need, the locks compared over the same faults, the one to use and what
would change the answer; then the locks to avoid.

Every line is computed from the matrix cells (lab/report/matrix.py, each judged beside the no-lock control, so a
loss the store suffers with or without a lock is charged to the store) and the run's declarations in meta.json
(capabilities, where each lock lives, one-line summaries): a need selects locks by what they declare, never by
name, so a plugin lands where it qualifies.

A candidate qualifies for a need when no fault it faced failed it (✗, or ⚠ a lock lost while its holder still
believed it held), at least one fault took its right away while the company stayed whole (✓), and it is not
unknown (not run, errored, safety unknown) under a fault that failed another candidate: a lock cannot qualify by
never facing what broke the others. *n/a* is not unknown: it means, by the lock's declaration, that the fault
reaches none of its lock, fence or writes.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from lab.capabilities import Capability
from lab.measures.kinds import Measured
from lab.post_role import PostRole
from lab.report.common import backend_with_role, declaration
from lab.report.declared import matrix_columns
from lab.report.matrix import Cell, MatrixCell, control_of, matrix_rows
from lab.report.sections import RunView, section
from lab.report.standing import Outcome, Standing, counts_line, outcome_of
from lab.report.strength import STRONG_AT_MOST, bound_text
from lab.where import Where

HELD_ACROSS_WRITES = frozenset({Capability.SESSION_LOCK, Capability.LEASE_EXPIRY,
                                Capability.CONNECTION_HELD})  # as Backend.holds_across_writes


def where_of(meta: dict, backend: str) -> Where | None:
    """Where a backend's lock, fence and writes live, as its run recorded it; for a run recorded before that, from
    its lock service (every built-in lock wrote to PostgreSQL, and a fenced one was fenced there)."""
    recorded = declaration(meta, "where", backend)
    if isinstance(recorded, dict):
        return Where.from_json(recorded)
    service = declaration(meta, "lock_service", backend)
    if service is None:
        return None
    fenced = Capability.FENCING in (declaration(meta, "capabilities", backend) or ())
    return Where(lock=service, writes="postgres", fence="postgres" if fenced else None)


@dataclass(frozen=True)
class Need:
    """A need an engineer comes with, and which declared locks can serve it at all."""

    title: str
    serves: Callable[[frozenset, Where], bool]  # (capabilities, where it lives) -> can it serve the need
    why: str  # what a lock must do for it, in one line
    names_services: bool = False  # its heading names the lock services its candidates declare


NEEDS = [
    Need("One writer per company, every write in PostgreSQL",
         lambda caps, where: where.writes == "postgres",
         "the company's rows are in PostgreSQL, wherever the lock lives"),
    Need("One writer per company, every write in MariaDB",
         lambda caps, where: where.writes == "mariadb",
         "the company's rows are in MariaDB, wherever the lock lives"),
    Need("A run-level lock held across many transactions",
         lambda caps, where: bool(HELD_ACROSS_WRITES & caps),
         "one right for the whole run, held between its per-company transactions"),
    Need("Writes outside PostgreSQL (no fence the storage can check)",
         lambda caps, where: bool(HELD_ACROSS_WRITES & caps) and where.fence is None,
         "the lock alone must keep a lapsed holder from writing"),
    Need("A lock service you already run",
         lambda caps, where: where.lock != where.writes,
         "the lock lives apart from the rows it protects", names_services=True),
]


def can_serve(need: Need, meta: dict, backend: str) -> bool:
    """Whether a backend can serve a need at all, by what the run's meta.json says it declares."""
    where = where_of(meta, backend)
    return where is not None and need.serves(frozenset(declaration(meta, "capabilities", backend) or ()), where)


def need_title(need: Need, meta: dict, candidates: list[str]) -> str:
    """The need's heading; the lock services one names are the ones its candidates declare."""
    if not need.names_services:
        return need.title
    services = sorted({w.lock for b in candidates if (w := where_of(meta, b)) is not None})
    return f"{need.title} ({', '.join(services)})" if services else need.title


# --- the comparison ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Comparison:
    """The candidates for one need over the same faults: every fault column any of them faced (not n/a).

    services: how many services each candidate's lock, fence and writes take (lab/where.py), the tie-break
    between candidates the evidence cannot tell apart: the one with fewer servers to run and keep in step."""

    standings: dict[str, Standing]
    services: dict[str, int] = field(default_factory=dict)

    @property
    def failed_by(self) -> dict[str, list[str]]:
        """Fault label -> the candidates it failed."""
        out: dict[str, list[str]] = {}
        for s in self.standings.values():
            for label in s.faults(Outcome.FAILED):
                out.setdefault(label, []).append(s.backend)
        return out

    def unproven(self, backend: str) -> list[str]:
        """The faults this candidate is unknown under that failed another candidate."""
        failed = self.failed_by
        return [label for label in self.standings[backend].faults(Outcome.UNKNOWN)
                if any(other != backend for other in failed.get(label, []))]

    def qualifies(self, backend: str) -> bool:
        s = self.standings[backend]
        return not s.count(Outcome.FAILED) and s.count(Outcome.KEPT) > 0 and not self.unproven(backend)

    def evidence(self, s: Standing) -> tuple:
        """How a qualifying candidate's evidence ranks, best lowest: fewest unknowns, strong before weak, the most
        faults kept, the most exercised trials behind them."""
        return (s.count(Outcome.UNKNOWN), s.weak, -s.count(Outcome.KEPT), -s.kept_trials)

    def ranked(self) -> list[Standing]:
        """The qualifying candidates, best first: by their evidence, then by fewer services, then by name."""
        fit = [s for b, s in self.standings.items() if self.qualifies(b)]
        return sorted(fit, key=lambda s: (self.evidence(s), self.services.get(s.backend, 0), s.backend))

    def tied(self) -> list[Standing]:
        """The qualifying candidates whose evidence ranks exactly as the best's."""
        ranked = self.ranked()
        return [s for s in ranked[1:] if self.evidence(s) == self.evidence(ranked[0])] if ranked else []

    def closest(self) -> Standing | None:
        """Where none qualifies: the candidate that kept the most and failed the least."""
        return max(self.standings.values(), key=lambda s: (s.count(Outcome.KEPT) - s.count(Outcome.FAILED),
                                                           -s.count(Outcome.UNKNOWN), s.backend), default=None)


def compare(rows: dict[str, list[MatrixCell]], candidates: list[str], meta: dict | None = None) -> Comparison:
    """The candidates' standings over the fault columns at least one of them faced."""
    labels = [c.label for c in next(iter(rows.values()), [])]
    faced = [i for i, label in enumerate(labels)
             if any(outcome_of(rows[b][i].cell) is not Outcome.NOT_APPLICABLE for b in candidates)]
    services = {b: len(w.services()) for b in candidates if (w := where_of(meta or {}, b)) is not None}
    return Comparison({b: Standing(b, {labels[i]: rows[b][i].cell for i in faced}) for b in candidates}, services)


# --- what a lock costs ------------------------------------------------------------------------------------------

def acquire_cost(frame: pd.DataFrame, backend: str) -> str | None:
    """Its acquire + release, median, from the latency scenario when this run measured it."""
    rows = frame[(frame.measured == Measured.LATENCY) & (frame.status == "ok") & (frame.backend == backend)]
    figures = [m["acquire_release"].get("p50") for m in rows.measures if (m.get("acquire_release") or {}).get("p50")]
    return None if not figures else f"{figures[-1] * 1000:.2f} ms"


def company_seconds(frame: pd.DataFrame, backend: str) -> tuple[float, int, int] | None:
    """A backend's one-worker, one-transaction-per-company rebuild from the cost table: (median seconds per
    company, companies, repetitions), or None when the run did not time it."""
    rows = frame[(frame.measured == Measured.COST) & (frame.status == "ok") & (frame.backend == backend)]
    per_company = [m for m in rows.measures
                   if m.get("workers") == 1 and m.get("transactions") == m.get("companies") and not m.get("failed")
                   and "COPY" not in str(m.get("config"))]
    if not per_company:
        return None
    return (statistics.median(m["seconds"] / m["companies"] for m in per_company), per_company[0]["companies"],
            len(per_company))


def cost_sentence(frame: pd.DataFrame, meta: dict, backend: str) -> str:
    """What the lock costs: per run where it is held across the run's transactions, per company where each company's
    transaction takes it (or checks its fence), as measured, or 'not measured'."""
    caps = frozenset(declaration(meta, "capabilities", backend) or ())
    no_lock = backend_with_role(frame, PostRole.NO_LOCK)
    bare = company_seconds(frame, no_lock) if no_lock else None  # the same transaction with no lock
    base = f"{bare[0] * 1000:.2f} ms without a lock" if bare else None
    mine = company_seconds(frame, backend)
    if mine is not None:
        against = f" against {base}" if base else ""
        per_company = (f"a company's transaction took {mine[0] * 1000:.2f} ms with it{against} (cost table, "
                       f"{mine[1]:,} companies, median of {mine[2]})")
    elif Capability.FENCING in caps:
        per_company = "a fence upsert in each company's transaction, not measured here"
    elif HELD_ACROSS_WRITES & caps:
        per_company = f"nothing in each company's transaction{f' ({base})' if base else ''}"
    else:
        per_company = "the lock in each company's transaction, not measured here"
    if HELD_ACROSS_WRITES & caps:
        cost = acquire_cost(frame, backend)
        per_run = f"acquire + release {cost} (median)" if cost else "acquire + release not measured here"
        return f"once per run, {per_run}; per company, {per_company}"
    return f"per company, {per_company}"


# --- the page ---------------------------------------------------------------------------------------------------

def strength_words(s: Standing) -> str:
    """'its weakest ✓: *pause* (n=2, ≤78%), weak' or 'every ✓ on at least 3 exercised trials (≤63%)'."""
    weakest = s.weakest()
    if weakest is None:
        return "no ✓ to weigh"
    label, cell = weakest
    n = cell.exercised
    if cell.strong:
        return f"every ✓ strong (weakest: *{label}*, n={n}, {bound_text(cell.bound or 1.0)})"
    return f"weak: its weakest ✓ is *{label}*, n={n}, {bound_text(cell.bound or 1.0)}"


def candidate_line(s: Standing, meta: dict, frame: pd.DataFrame, comparison: Comparison) -> str:
    summary = declaration(meta, "summaries", s.backend)
    what = f": {summary}" if summary else ""
    return (f"- `{s.backend}`{what}. {counts_line(s)} ({_count(s.kept_trials, 'exercised trial')}); "
            f"{strength_words(s)}. Cost {cost_sentence(frame, meta, s.backend)}.")


def verdict_paragraph(need_name: str, comparison: Comparison, meta: dict, frame: pd.DataFrame) -> str:
    """The need's one computed paragraph: what to use, what it costs, and what would change the answer."""
    ranked = comparison.ranked()
    if not ranked:
        closest = comparison.closest()
        if closest is None:
            return f"*For {_lower_first(need_name)}:* no lock measured here can serve it."
        failed = closest.faults(Outcome.FAILED)
        unproven = comparison.unproven(closest.backend)
        why = (f"it failed under {_listed(failed)}" if failed else
               f"it is unknown under {_listed(unproven)}, which failed another candidate" if unproven else
               "no fault took its right away")
        return (f"*For {_lower_first(need_name)}:* no lock measured here qualifies. The closest is `{closest.backend}`: "
                f"{why}.")
    best = ranked[0]
    caveats = []
    if best.weak:
        caveats.append(f"its evidence is weak ({strength_words(best).removeprefix('weak: ')}; the declared bound "
                       f"is {STRONG_AT_MOST * 100:.0f} %)")
    unknown = best.faults(Outcome.UNKNOWN)
    if unknown:
        caveats.append(f"it is unknown under {_listed(unknown)}")
    store = best.faults(Outcome.STORE)
    if store:
        caveats.append(f"the store lost acknowledged writes under {_listed(store)} whatever the lock (see *Store "
                       "findings*)")
    idle = best.faults(Outcome.NOT_EXERCISED)
    failed_elsewhere = [label for label in idle if comparison.failed_by.get(label)]
    if failed_elsewhere:
        caveats.append(f"{_listed(failed_elsewhere)} failed another candidate but never took this lock's right away")
    others = ", ".join(f"`{s.backend}`" for s in ranked[1:])
    also = f" Also qualifying: {others}." if others else ""
    tied = comparison.tied()
    if tied:
        also += (f" The evidence does not tell `{best.backend}` from {', '.join(f'`{s.backend}`' for s in tied)}; "
                 f"`{best.backend}` is named first for needing {_count(comparison.services.get(best.backend, 0), 'service')}"
                 f" (its lock, fence and writes) against {comparison.services.get(tied[0].backend, 0)}"
                 if comparison.services.get(best.backend, 0) < comparison.services.get(tied[0].backend, 0) else
                 f" The evidence does not tell `{best.backend}` from {', '.join(f'`{s.backend}`' for s in tied)}; "
                 "they are named in order of name") + "."
    change = "; ".join(caveats) if caveats else "nothing measured here: it kept every fault that took its right away"
    return (f"*For {_lower_first(need_name)}:* use `{best.backend}`. Cost {cost_sentence(frame, meta, best.backend)}. "
            f"What would change the answer: {change}.{also}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _lower_first(title: str) -> str:
    """'One writer per company, every write in PostgreSQL' -> 'one writer per company, every write in PostgreSQL'."""
    return title[:1].lower() + title[1:]


def _listed(labels: list[str]) -> str:
    return "; ".join(f"*{label}*" for label in labels)


def avoid_lines(avoid: list[Standing]) -> list[str]:
    """The locks to avoid, grouped by the first fault that rules each out: one line per fault, each lock with what
    that fault did to it and how many more faults failed it (the matrix has every cell)."""
    grouped: dict[str, list[str]] = {}
    for s in avoid:
        failed = s.faults(Outcome.FAILED)
        words = s.cells[failed[0]].text.split(" ", 1)[1].split(" · ")[0]
        more = f", and {len(failed) - 1} more" if len(failed) > 1 else ""
        grouped.setdefault(failed[0], []).append(f"`{s.backend}` ({words}{more})")
    return [f"- *{label}*: {'; '.join(locks)}." for label, locks in grouped.items()]


def situation(run: RunView, rows: dict[str, list[MatrixCell]]) -> list[str]:
    """The post's own reader: a session lock on a default connection, with a DBA's idle-in-transaction guard. Is
    it safe, the smallest fix, the robust fix and its cost, from the cells of the methods the backends declare."""
    roles = {role: backend_with_role(run.frame, role) for role in (PostRole.METHOD_1, PostRole.METHOD_3,
                                                                     PostRole.METHOD_4)}
    guard = next((c.label for _, c in matrix_columns(run.meta) if c.setting == "idle_in_transaction_session_timeout"),
                 None)
    first, smallest, robust = (roles[r] for r in (PostRole.METHOD_1, PostRole.METHOD_3, PostRole.METHOD_4))
    if guard is None or first not in rows or smallest not in rows:
        return []
    cell_at = {b: {c.label: c.cell for c in rows[b]} for b in (first, smallest, robust) if b in rows}
    if guard not in cell_at[first]:
        return []
    lines = ["**A session lock on a default connection (psycopg2 through SQLAlchemy), with a DBA's "
             "idle_in_transaction_session_timeout:**", ""]
    hit = cell_at[first][guard]
    safe = outcome_of(hit) in (Outcome.KEPT, Outcome.NOT_EXERCISED)
    lines.append(f"- Is it safe? {'Yes' if safe else 'No'}: `{first}` under *{guard}*: {hit.text}.")
    small = cell_at[smallest].get(guard)
    broke = [c.label for c in rows[smallest] if outcome_of(c.cell) is Outcome.FAILED]
    if small is not None:
        lines.append(f"- The smallest fix: the lock on an AUTOCOMMIT connection (`{smallest}`): under that guard, "
                     f"{small.text}; but it still fails under {len(broke)} other faults"
                     + (f" ({_listed(broke[:4])}{'; …' if len(broke) > 4 else ''})" if broke else "") + ".")
    if robust in rows:
        mine = [c.cell for c in rows[robust]]
        kept = sum(outcome_of(c) is Outcome.KEPT for c in mine)
        failed = [c.label for c in rows[robust] if outcome_of(c.cell) is Outcome.FAILED]
        store = sum(outcome_of(c) is Outcome.STORE for c in mine)
        lines.append(f"- The robust fix: the lock inside the write transaction (`{robust}`): kept the company whole "
                     f"under {kept} faults that took its right away, failed under {len(failed)}"
                     + (f" ({_listed(failed)})" if failed else "")
                     + (f", and lost acknowledged writes only where the store did under {store}" if store else "")
                     + f". Cost {cost_sentence(run.frame, run.meta, robust)}.")
    return lines + [""]


@section(10)
def section_decide(run: RunView) -> str | None:
    frame, meta = run.frame, run.meta
    control = control_of(frame)
    rows = {backend: cells for backend, cells in matrix_rows(run) if "@" not in backend}  # driver rows apart
    backends = [b for b in rows if b != control]
    if not backends:
        return None
    out = ["## Which lock, for which need", "",
           "Decided from this run's trials, each judged on three questions apart: did the lock keep its promise, "
           "did the company stay whole, did the store keep every acknowledged write. Candidates for a need are "
           "compared over the same faults: every fault any of them faced. A lock qualifies when no fault failed it "
           "(✗, or ⚠ lost while its holder believed it held), at least one took its right away while the company "
           "stayed whole (✓), and it is not unknown (not run, errored) under a fault that failed another candidate. "
           "A loss the no-lock control suffers the same way, with the lock's promise kept, is the store's (◆): it "
           "disqualifies no lock. Each ✓ has a 95 % bound on its failure rate; a recommendation resting on one "
           f"above {STRONG_AT_MOST * 100:.0f} % says it is weak.", ""]
    out += situation(run, rows)
    chosen: dict[str, Standing] = {}
    for need in NEEDS:
        able = [b for b in backends if can_serve(need, meta, b)]
        if not able:
            continue
        comparison = compare(rows, able, meta)
        chosen.update(comparison.standings)
        title = need_title(need, meta, able)
        ranked = comparison.ranked()
        faced = len(next(iter(comparison.standings.values())).cells)
        out += [f"**{title}** ({need.why}; {_count(len(able), 'candidate')} over {_count(faced, 'fault')}):", ""]
        out += [candidate_line(s, meta, frame, comparison) for s in ranked]
        unproven = [(b, comparison.unproven(b)) for b in able if comparison.unproven(b)
                    and not comparison.standings[b].count(Outcome.FAILED)]
        out += [f"- `{b}` is unproven: unknown under {_listed(labels)}, which failed another candidate."
                for b, labels in unproven]
        out += ["", verdict_paragraph(title, comparison, meta, frame), ""]
    avoid = [s for s in chosen.values() if s.count(Outcome.FAILED)]
    order = {b: i for i, b in enumerate(backends)}
    if avoid:
        out += ["**Do not use** (by the first fault that rules each out, with its trials and how many more faults "
                "failed it; the matrix has every cell):", "",
                *avoid_lines(sorted(avoid, key=lambda s: order[s.backend])), ""]
    return "\n".join(out)


def qualifying(run: RunView) -> dict[int, set[str]]:
    """Need index (in NEEDS) -> the backends that qualify for it: what the HTML report's need filter stars."""
    control = control_of(run.frame)
    rows = {backend: cells for backend, cells in matrix_rows(run) if "@" not in backend}
    out = {}
    for i, need in enumerate(NEEDS):
        able = [b for b in rows if b != control and can_serve(need, run.meta, b)]
        comparison = compare(rows, able, run.meta) if able else Comparison({})
        out[i] = {b for b in able if comparison.qualifies(b)}
    return out


__all__ = ["NEEDS", "Need", "can_serve", "compare", "qualifying", "section_decide", "Cell"]
