"""The report's first screen: the decision (lab/decision) drawn in Markdown, and the grid it is computed from.

The grid is the run's matrix read for every harm a need declares (lab/report/matrix.py judges each cell beside the
no-lock control), with each lock's cost per company from the cost table. The decision is computed once per run
(lab/decision/answer.py); this module only words it: one line per need in a table, what would change each answer
written once per lock, then the locks to avoid. The comparison behind each need (every candidate's counts, the
ones unproven and why) is a section of its own after the summary matrix.
"""

from __future__ import annotations

import statistics
import weakref

import pandas as pd

from lab.decision.answer import Decision, NeedAnswer, can_serve, decide
from lab.decision.cells import Cell
from lab.decision.compare import RULES_TEXT, Adoption, Comparison, Rule
from lab.decision.cost import CompanyCost
from lab.decision.grid import Grid
from lab.decision.needs import HELD_ACROSS_WRITES, NEEDS
from lab.decision.standing import Outcome, Standing, counts_line, outcome_of
from lab.decision.harm import Harm
from lab.decision.strength import bound_text
from lab.decision.where import where_of
from lab.declarations.capabilities import Capability
from lab.measures.kinds import Measured
from lab.declarations.post_role import PostRole
from lab.report.common import backend_with_role, declaration
from lab.report.company_cost import company_cost as measured_cost
from lab.report.declared import matrix_columns
from lab.report.matrix import control_of, declared_run, matrix_rows
from lab.report.sections import RunView, section

__all__ = ["NEEDS", "can_serve", "grid_of", "decision_of", "qualifying", "section_decide", "cost_sentence",
           "company_cost", "where_of", "verdict_sentence"]


# --- what a lock costs ------------------------------------------------------------------------------------------

def acquire_cost(frame: pd.DataFrame, backend: str) -> str | None:
    """Its acquire + release, median, from the latency scenario when this run measured it."""
    rows = frame[(frame.measured == Measured.LATENCY) & (frame.status == "ok") & (frame.backend == backend)]
    figures = [m["acquire_release"].get("p50") for m in rows.measures if (m.get("acquire_release") or {}).get("p50")]
    return None if not figures else f"{figures[-1] * 1000:.2f} ms"


def company_cost(frame: pd.DataFrame, backend: str) -> CompanyCost | None:
    """A backend's cost per company: from the company-cost trials (its own write path beside the no-lock control,
    lab/report/company_cost.py), else from the post's cost table (one worker, one transaction per company), else
    None when the run did not time it."""
    paired = measured_cost(frame, backend)
    if paired is not None:
        return CompanyCost(paired.seconds, paired.seconds_low, paired.seconds_high, paired.repetitions,
                           paired.companies, paired.ratio, paired.ratio_low, paired.ratio_high, paired.store)
    rows = frame[(frame.measured == Measured.COST) & (frame.status == "ok") & (frame.backend == backend)]
    per_company = [m for m in rows.measures
                   if m.get("workers") == 1 and m.get("transactions") == m.get("companies") and not m.get("failed")
                   and "COPY" not in str(m.get("config"))]
    if not per_company:
        return None
    seconds = [m["seconds"] / m["companies"] for m in per_company]
    return CompanyCost(statistics.median(seconds), min(seconds), max(seconds), len(seconds),
                       per_company[0]["companies"])


def cost_sentence(frame: pd.DataFrame, meta: dict, backend: str) -> str:
    """What the lock costs: per run where it is held across the run's transactions, per company where each company's
    transaction takes it (or checks its fence), as measured, or 'not measured'."""
    caps = frozenset(declaration(meta, "capabilities", backend) or ())
    no_lock = backend_with_role(frame, PostRole.NO_LOCK)
    bare = company_cost(frame, no_lock) if no_lock else None  # the same transaction with no lock
    base = f"{bare.seconds * 1000:.2f} ms without a lock" if bare else None
    mine = company_cost(frame, backend)
    if mine is not None:
        per_company = f"{mine.words()}{f' against {base}' if base else ''}"
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


# --- the grid and the decision, once per run ------------------------------------------------------------------

_MEMO: dict[int, tuple[weakref.ref, Grid, Decision]] = {}


def _computed(run: RunView) -> tuple[Grid, Decision]:
    key = id(run.frame)
    known = _MEMO.get(key)
    if known is not None and known[0]() is run.frame:
        return known[1], known[2]
    harms = list(dict.fromkeys(need.harm for need in NEEDS))
    cells = {harm: {backend: tuple(c.cell for c in row) for backend, row in matrix_rows(run, harm)} for harm in harms}
    labels = tuple(column.label for _, column in declared_run(run))
    backends = list(next(iter(cells.values()), {}))
    costs = {b: company_cost(run.frame, b) for b in backends}
    grid = Grid(labels, cells, run.meta, control_of(run.frame), costs)
    decision = decide(grid)
    _MEMO[key] = (weakref.ref(run.frame, lambda _: _MEMO.pop(key, None)), grid, decision)
    return grid, decision


def grid_of(run: RunView) -> Grid:
    """The run's matrix read for every harm a need declares, with each lock's cost per company."""
    return _computed(run)[0]


def decision_of(run: RunView) -> Decision:
    """The decision for this run, computed once (lab/decision/answer.py)."""
    return _computed(run)[1]


def decision_shown(run: RunView) -> Decision | None:
    """The decision the report's pages show, or None for a run with no fault column or no need a lock serves."""
    if not grid_of(run).labels:
        return None
    decision = decision_of(run)
    return decision if decision.needs else None


def qualifying(run: RunView) -> dict[int, set[str]]:
    """Need index (in NEEDS) -> the backends that qualify for it: what the HTML report's need filter stars."""
    decision = decision_of(run)
    out: dict[int, set[str]] = {i: set() for i in range(len(NEEDS))}
    for answer in decision.needs:
        out[NEEDS.index(answer.need)] = {s.backend for s in answer.ranked}
    return out


# --- words --------------------------------------------------------------------------------------------------------

def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _listed(labels: list[str]) -> str:
    return "; ".join(f"*{label}*" for label in labels)


def cell_words(label: str, cell: Cell) -> str:
    """'*holder paused*, n=20, ≤14%'."""
    return f"*{label}*, n={cell.exercised}, {bound_text(cell.bound or 1.0)}"


def _services_words(meta: dict, backend: str) -> str:
    where = where_of(meta, backend)
    return ", ".join(sorted(where.services())) if where else "unknown"


def separation(answer: NeedAnswer, meta: dict) -> str:
    """What puts the choice ahead of the runner-up, in the words of the rule that did."""
    first, second, comparison = answer.choice, answer.runner_up, answer.comparison
    if first is None or second is None:
        return "none other qualifies"
    rule = answer.rule
    if rule is Rule.SERVICES:
        return (f"`{second}`: it needs {_count(comparison.services.get(second, 0), 'service')} "
                f"({_services_words(meta, second)}) against {comparison.services.get(first, 0)} "
                f"({_services_words(meta, first)})")
    if rule is Rule.COST:
        mine, theirs = comparison.costs.get(first), comparison.costs.get(second)
        return (f"`{second}`: it costs {theirs.words() if theirs else 'not measured'} against "
                f"{mine.words() if mine else 'not measured'}")
    if rule is Rule.STRENGTH:
        weak, strong_one = comparison.weakest(second), comparison.weakest(first)
        return (f"`{second}`: its weakest deciding ✓ is {cell_words(*weak) if weak else 'none'} against "
                f"{cell_words(*strong_one) if strong_one else 'none'}")
    if rule is Rule.ADOPTION:
        return f"`{second}`: measured alike; {ADOPTION_WORDS[adoption(comparison, first)]} against " \
               f"{ADOPTION_WORDS[adoption(comparison, second)]}"
    return f"`{second}`: measured alike (by name)"


ADOPTION_WORDS = {Adoption.POSTS_FIX: "the post's fix", Adoption.OWN_CODE: "your own code",
                  Adoption.LIBRARY: "a library to add"}


def adoption(comparison: Comparison, backend: str) -> Adoption:
    return Adoption(comparison.adoption.get(backend, Adoption.LIBRARY))


def _cost_words(answer: NeedAnswer) -> str:
    cost = answer.comparison.costs.get(answer.choice or "")
    return cost.words() if cost else "not measured"


def situation(run: RunView, decision: Decision) -> list[str]:
    """The post's own reader: a session lock on a default connection, with a DBA's idle-in-transaction guard: is it
    safe, the smallest fix and the robust fix, from the same cells and the same decision as the needs."""
    grid = grid_of(run)
    first, smallest, robust = (backend_with_role(run.frame, r) for r in (PostRole.METHOD_1, PostRole.METHOD_3,
                                                                           PostRole.METHOD_4))
    guard = next((c.label for _, c in matrix_columns(run.meta) if c.setting == "idle_in_transaction_session_timeout"),
                 None)
    if guard is None or guard not in grid.labels or first is None or smallest is None:
        return []
    harm = NEEDS[0].harm
    hit = grid.row(harm, first)[guard]
    safe = outcome_of(hit) in (Outcome.KEPT, Outcome.NOT_EXERCISED)
    lines = [f"**Your situation**, a session lock on a default connection under a DBA's "
             f"`idle_in_transaction_session_timeout`: {'safe' if safe else 'not safe'}, `{first}` {hit.text.split(' · ')[0]}."]
    small_row = grid.row(harm, smallest)
    broke = [label for label, cell in small_row.items() if outcome_of(cell) is Outcome.FAILED]
    lines.append(f"The smallest fix, AUTOCOMMIT (`{smallest}`): {small_row[guard].text.split(' · ')[0]} there, but "
                 f"it fails {_count(len(broke), 'other fault')}{f' (first: *{broke[0]}*)' if broke else ''}.")
    if robust is not None and robust in grid.backends:
        chosen = [a.need.short or a.need.title for a in decision.needs if a.choice == robust]
        qualified = [a for a in decision.needs if robust in {s.backend for s in a.ranked}]
        if chosen:
            verdict = f"the answer below for {_listed_plain(chosen)}"
        elif qualified:
            verdict = f"qualifies for {_listed_plain([a.need.title for a in qualified])}, ranked after `{qualified[0].choice}`"
        else:
            why = next((a for a in decision.needs if robust in a.candidates), None)
            verdict = f"qualifies for no need: {_why_not(why, robust) if why else 'no need admits it'}"
        lines.append(f"The robust fix, `{robust}` (the lock inside the write transaction): {verdict}.")
    return [lines[0], " ".join(lines[1:]), ""] if len(lines) > 1 else [lines[0], ""]


def _listed_plain(titles: list[str]) -> str:
    return "; ".join(t[:1].lower() + t[1:] for t in titles)


def _why_not(answer: NeedAnswer, backend: str, brief: bool = False) -> str:
    """Why a candidate does not qualify for a need, in one clause (brief: without saying why a fault counts)."""
    if backend in answer.ruled_out:
        return f"failed under *{answer.ruled_out[backend]}*"
    unproven = answer.comparison.unproven(backend)
    if unproven:
        return f"unproven under *{unproven[0]}*" + ("" if brief else ", which failed another candidate")
    return "no fault took its right away"


def need_row(answer: NeedAnswer, meta: dict) -> list[str]:
    """One line of the decision table: need (its harm), the lock, the rule, runner-up, weakest deciding ✓, cost."""
    need = f"{answer.need.short or answer.title} ({_count(len(answer.candidates), 'candidate')}, " \
           f"{_count(answer.comparison.faced, 'fault')})"
    if answer.choice is None:
        closest = f"closest `{answer.closest}`: {_why_not(answer, answer.closest, brief=True)}" \
            if answer.closest else "-"
        return [need, "none qualifies", "-", closest, "-", "-"]
    weakest = answer.weakest
    strength = cell_words(*weakest) + ("" if weakest[1].strong else ", weak") if weakest else "none"
    rule = answer.rule.value if answer.rule else "the only qualifier"
    return [need, f"`{answer.choice}`", rule, separation(answer, meta), strength, _cost_words(answer)]


def verdict_sentence(answer: NeedAnswer, meta: dict) -> str:
    """The need's answer in one sentence, the table row's words: what to use, what ranked it first, the runner-up and
    what separates them, its weakest deciding ✓, its cost, and what would change the answer."""
    title = answer.title[:1].lower() + answer.title[1:]
    if answer.choice is None:
        closest = f" The closest is `{answer.closest}`: {_why_not(answer, answer.closest)}." if answer.closest else ""
        return f"*For {title}:* no lock measured here qualifies.{closest}"
    _, lock, rule, runner_up, strength, cost = need_row(answer, meta)
    changes = "; ".join(f"*{c.label}*: {c.takes}" for c in answer.changes) or "nothing measured here"
    return (f"*For {title}:* use {lock}, ranked first by {rule}; runner-up {runner_up}. Its weakest deciding ✓: "
            f"{strength}. Cost per company: {cost}. What would change the answer: {changes}.")


def change_lines(decision: Decision) -> list[str]:
    """What would change each recommended lock's answer, written once per lock, at most five items each; weak ✓
    cells that the same number of trials would make strong are said once, their faults listed."""
    out: dict[str, NeedAnswer] = {}
    for answer in decision.needs:
        if answer.choice is not None:
            out.setdefault(answer.choice, answer)
    lines = []
    for backend, answer in out.items():
        groups: dict[tuple, list[str]] = {}
        for c in answer.changes:
            if c.more is not None and c.cell.bound is not None:
                key: tuple = (c.more, c.cell.exercised, c.cell.bound)
            else:
                key = (c.takes,)
            groups.setdefault(key, []).append(f"*{c.label}*")
        items = []
        for key, faults in groups.items():
            if len(key) == 3:
                more, n, bound = key
                each = "each " if len(faults) > 1 else ""
                items.append(f"a failure under {', '.join(faults)} ({each}✓ n={n}, {bound_text(bound)}; strong after "
                             f"{more} more clean trials)")
            else:
                items.append(f"{key[0]}: {', '.join(faults)}")
        lines.append(f"- `{backend}`: " + ("; ".join(items) if items else
                                            "nothing measured here: every deciding ✓ is strong") + ".")
    return lines


def avoid_lines(decision: Decision) -> list[str]:
    """The locks to avoid, grouped by the first fault that rules each out (read for the surviving company), the
    mark's words said once for a group that shares them."""
    grouped: dict[str, list[tuple[str, str]]] = {}
    for avoid in decision.avoid:
        words = avoid.cell.text.split(" · ")[0].split(" ", 1)[-1]
        grouped.setdefault(avoid.label, []).append((avoid.backend, words))
    lines = []
    for label, locks in grouped.items():
        said = sorted({words for _, words in locks})
        lines.append(f"- *{label}* ({'; '.join(said)}): {', '.join(f'`{b}`' for b, _ in locks)}.")
    return lines


def rules_text() -> str:
    """The decision's rules in a few lines, from the harms and the ranking's rules as declared."""
    rules = "; ".join(f"{i}. {rule.value}" for i, rule in enumerate(Rule, 1))
    return (f"Each need is read for its own harm: in a database, the {Harm.SURVIVING_COMPANY.value} (whole, no stale "
            f"write; a write the store discarded is the store's, ◆); outside it, {Harm.TWO_HOLDERS.value} at once.\n"
            "Under every fault that failed a candidate, every other needs ✓ with its n, ◆, *unaffected* or n/a, else "
            f"it is unproven. Ranked by {rules} ([in full](#the-comparison-behind-each-need)).")


@section(10)
def section_decide(run: RunView) -> str | None:
    decision = decision_shown(run)
    if decision is None:
        return None
    out = ["## Which lock, for which need", "", rules_text(), "", *situation(run, decision),
           "| need (candidates, faults) | use | ranked first by | runner-up: what separates them | "
           "weakest deciding ✓ | cost per company |", "|---|---|---|---|---|---|",
           *["| " + " | ".join(need_row(a, run.meta)) + " |" for a in decision.needs], ""]
    changes = change_lines(decision)
    if changes:
        out += ["**What would change the answer**, weakest first:", "", *changes, ""]
    if decision.avoid:
        out += [f"**Do not use** {_count(len(decision.avoid), 'lock')}, each failed for every need it can serve "
                "([which, and how](#do-not-use)).", ""]
    return "\n".join(out)


# --- after the summary matrix: the comparison behind each need ----------------------------------------------------

def candidate_line(s: Standing, comparison: Comparison, meta: dict) -> str:
    summary = declaration(meta, "summaries", s.backend)
    weakest = comparison.weakest(s.backend)
    strength = f"weakest deciding ✓ {cell_words(*weakest)}" if weakest else "no ✓"
    return f"- `{s.backend}`{f': {summary}' if summary else ''}. {counts_line(s)}; {strength}."


@section(13)
def section_comparison(run: RunView) -> str | None:
    decision = decision_shown(run)
    if decision is None:
        return None
    out = ["## The comparison behind each need", ""]
    if decision.avoid:
        out += ["### Do not use", "",
                "Each lock below qualifies for no need it can serve, by the first fault that rules it out, read for "
                "the surviving company ([every cell](REPORT-matrix.md)):", "", *avoid_lines(decision), ""]
    out += ["### Every candidate, need by need", "",
            "Every candidate of each need over the faults any of them faced, each cell read for the need's harm: the "
            "qualifiers in ranking order, then the others with the fault that rules each out or leaves it unproven. "
            f"The ranking's rules, in order: {RULES_TEXT}.", ""]
    for answer in decision.needs:
        comparison = answer.comparison
        out += [f"**{answer.title}** ({answer.need.why}; harm: {answer.need.harm.meaning}):", ""]
        out += [candidate_line(s, comparison, run.meta) for s in answer.ranked]
        qualified = {s.backend for s in answer.ranked}
        out += [f"- `{b}`: {_why_not(answer, b)}." for b in answer.candidates if b not in qualified]
        out.append("")
    return "\n".join(out)
