"""Evidence for the post's 'Why not just...?' rows that only the whynot scenario measures.

Each function reads the whynot trials (and, where it helps, the cases trials) of a run and returns the
row's evidence as a sentence built from their measures, citing the trials it used; None when the run
has no such trials, so a run without them renders its row as before (giant_transaction is handed the cost
table's clause by the summary, and keeps it and the old wording then). Nothing here is typed in: every
word that ranks or says "waited", "excluded" or "overwritten" is chosen by a figure.
"""

from __future__ import annotations

import statistics
from typing import Callable

import pandas as pd

from lab.checkers.outcomes import outcome_text
from lab.measures.kinds import Measured
from lab.declarations.post_role import PostRole
from lab.report.common import ok_trials, with_role

GUARD_OFF = PostRole.GUARD_OFF  # the row's alternative: the guard set to 0 on the lock's own session
KAFKA = "Kafka partitioning: not measured: no Kafka server can run here"


def _trials(frame: pd.DataFrame, variant: str, role: PostRole | None = None) -> pd.DataFrame:
    """The ok whynot trials of a variant: every backend's, or the one playing the post's role."""
    group = ok_trials(frame, Measured.ALTERNATIVES)
    group = group[group.variant == variant]
    return group if role is None else with_role(group, role)


def _cite(group: pd.DataFrame) -> str:
    """'whynot/row_lock/fk_child_insert, n=3' for each backend of a group of trials."""
    parts = [f"whynot/{backend}/{variant}, n={len(g)}" for (backend, variant), g in group.groupby(
        ["backend", "variant"], sort=False)]
    return "(" + "; ".join(parts) + ")"


def _measured(frame: pd.DataFrame, described: list[tuple[str, Callable[[str, list[dict]], str]]],
              tail: str = "") -> str | None:
    """"measured: " and, variant by variant and backend by backend, what describe(backend, the measures of its ok
    trials of that variant) says, citing those trials, then tail; None where no variant has a trial."""
    parts, cited = [], []
    for variant, describe in described:
        for backend, g in _trials(frame, variant).groupby("backend", sort=False):
            parts.append(describe(backend, list(g.measures)))
            cited.append(g)
    if not parts:
        return None
    return "measured: " + "; ".join(parts) + " " + _cite(pd.concat(cited)) + tail


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _of(done: int, total: int) -> str:
    return f"{done}/{total}"


# --- SET idle_in_transaction_session_timeout = 0 -----------------------------------------------------------

def guard_off(frame: pd.DataFrame) -> str | None:
    """Whether the lock survives the guard with it set to 0 on its session or on its role, and what its open
    transaction holds back."""
    session, role = _guard_off_session(frame), _guard_off_role(frame)
    if session is None and role is None:
        return None
    if session is None:
        return f"measured: {role}"
    return session if role is None else f"{session}; {role}"


def _guard_off_role(frame: pd.DataFrame) -> str | None:
    """The guard set on the database and turned off on the holder's role, against a session the guard ends."""
    group = _trials(frame, "guard_off_role")
    if group.empty:
        return None
    ms = list(group.measures)
    kept = sum(bool(m["holder"]["held_after"]) for m in ms)
    ended = sum(m["control"]["state"] == "gone" for m in ms)
    said = sorted({m["control"]["server_said"] for m in ms if m["control"]["server_said"]})
    return (f"on a role (ALTER ROLE ... SET idle_in_transaction_session_timeout = 0, the guard at "
            f"{ms[0]['timeout_s']:g} s set on the database): the lock's session read the guard as "
            f"{_states(m['holder']['guard'] + ' from ' + m['holder']['source'] for m in ms)} and kept its lock past "
            f"it in {_of(kept, len(ms))} trials, while a session of the lab's own user under the same database "
            f"guard ({_states(m['control']['guard'] + ' from ' + m['control']['source'] for m in ms)}) was ended "
            f"by it in {_of(ended, len(ms))}" + (f" (server log: {'; '.join(said)})" if said else "")
            + " " + _cite(group))


def _guard_off_session(frame: pd.DataFrame) -> str | None:
    """The guard set to 0 on the lock's own session: the lock kept, the horizon held."""
    group = _trials(frame, "xmin_horizon", GUARD_OFF)
    if group.empty:
        return None
    ms = list(group.measures)
    guard_off = group.backend.iloc[0]
    mine, base, xid = [m["backend"] for m in ms], [m["baseline"] for m in ms], [m["open_xid"] for m in ms]
    kept = sum(bool(m["held_after"]) for m in mine)
    timeout = ms[0]["timeout_s"]
    held_xmin = [m for m in mine if m["xmin_age"] is not None or m["xid_age"] is not None]
    horizon = ("its open transaction held no snapshot and no transaction id (backend_xmin and backend_xid "
               "empty in pg_stat_activity)" if not held_xmin else
               f"its open transaction held the horizon in {len(held_xmin)}/{len(mine)} trials (backend_xmin age "
               f"{_count(_median(m['xmin_age'] for m in mine))}, backend_xid age "
               f"{_count(_median(m['xid_age'] for m in mine))})")
    parts = [
        f"measured: with the guard at {timeout:g} s on its session, {guard_off} still held its lock past it in "
        f"{_of(kept, len(mine))} trials ({_cases(frame)})",
        f"{horizon}, and VACUUM left {_count(_median(m['not_removable'] for m in mine))} dead rows it could not "
        f"remove in the rebuilt table after {_count(_median(m['deleted'] for m in mine))} deleted, against "
        f"{_count(_median(m['not_removable'] for m in base))} under {ms[0]['baseline_backend']} (medians)",
        f"a transaction on such a session that has a transaction id (one write on it gives it one) left "
        f"{_count(_median(m['not_removable'] for m in xid))} of {_count(_median(m['deleted'] for m in xid))} "
        f"not removable, removable cutoff {_count(_median(m['cutoff_xids_old'] for m in xid))} XIDs old, and it "
        f"was still {_states(m['state'] for m in xid)} past the guard's timeout: the guard no longer ends it",
    ]
    others = _trials(frame, "xmin_horizon")
    rest = others[others.post_role != GUARD_OFF]
    if not rest.empty:
        parts.append("under the same guard: " + ", ".join(
            f"{b} kept its lock in {_of(sum(bool(m['backend']['held_after']) for m in g.measures), len(g))} and left "
            f"{_count(_median(m['backend']['not_removable'] for m in g.measures))} not removable"
            for b, g in rest.groupby("backend", sort=False)))
    return "; ".join(parts) + " " + _cite(others)


def _cases(frame: pd.DataFrame) -> str:
    """The cases trials of the guard-off lock under the idle-in-transaction guard, when the run has them."""
    group = ok_trials(frame, Measured.POST_CASE)
    group = with_role(group[group.variant == "idle_in_transaction"], GUARD_OFF)
    if group.empty:
        return "no cases trials in this run"
    return f"cases, idle in transaction past the timeout: {outcome_text(group.to_dict('records'))}"


# --- One giant transaction --------------------------------------------------------------------------------

GIANT_REASONED = "vacuum and lost work on failure are reasoned, not measured"


def giant_transaction(frame: pd.DataFrame, cost: str | None) -> str | None:
    """The row's evidence: `cost`, the cost table's ranking of one transaction for all (computed from the perf
    trials by the summary), then what a kill halfway and its open transaction id cost, from the giant_transaction
    trials; a run without them keeps the clause saying those are reasoned. None when there is neither."""
    group = _trials(frame, "giant_transaction")
    if group.empty:
        return None if cost is None else f"{cost}; {GIANT_REASONED}"
    measured = _giant(list(group.measures)) + " " + _cite(group)
    return f"{cost}; {measured}" if cost else f"measured: {measured}"


def _giant(ms: list[dict]) -> str:
    """One transaction for every company against one per company, both killed halfway: work lost, horizon held."""
    giant, each, n = [m["giant"] for m in ms], [m["per_company"] for m in ms], len(ms)

    def med(runs: list[dict], key: str) -> str:
        return _count(_median(r[key] for r in runs))

    lost_all = sum(g["committed"] == 0 and g["lost"] == g["written"] for g in giant)
    lost_one = sum(e["lost"] == 1 for e in each)
    whole = sum(g["companies_whole"] and e["companies_whole"] for g, e in zip(giant, each))
    compared = [(g, e) for g, e in zip(giant, each) if not g.get("others_held") and not e.get("others_held")]
    more = sum(g["not_removable"] > e["not_removable"] for g, e in compared)
    shared = "" if len(compared) == n else f" ({n - len(compared)} not compared: another session held the horizon too)"
    gone = _median(r["kill"]["gone_after_s"] for r in giant + each)
    return (
        f"killed halfway through {_count(_median(m['companies'] for m in ms))} companies (pg_terminate_backend, "
        f"the session gone from pg_stat_activity after {_seconds(gone)}), one transaction for all lost every company "
        f"it had written in {_of(lost_all, n)} trials ({med(giant, 'lost')} lost, {med(giant, 'committed')} "
        f"committed), one transaction per company lost one in {_of(lost_one, n)} ({med(each, 'lost')} lost, "
        f"{med(each, 'committed')} committed), every company whole after both kills in {_of(whole, n)}; "
        f"the giant's transaction id aged from {_count(_median(g['xid_ages'][0] for g in giant))} to "
        f"{_count(_median(g['xid_ages'][-1] for g in giant))} transactions over the companies it wrote (a per-company "
        f"transaction's at most {_count(_median(max(e['xid_ages']) for e in each))}), and VACUUM of a table other "
        f"traffic churned meanwhile could not remove {med(giant, 'not_removable')} dead rows "
        f"({med(giant, 'churned_while_open')} churned while it was open), against {med(each, 'not_removable')} "
        f"({med(each, 'churned_while_open')}) for the per-company transaction killed inside company N/2+1 "
        f"(medians); it held back more in {_of(more, len(compared))}{shared}")


# --- A row lock or a unique constraint ---------------------------------------------------------------------

def row_lock_or_unique(frame: pd.DataFrame) -> str | None:
    return _measured(frame, [("fk_child_insert", _fk_child), ("no_parent_row", _no_parent),
                             ("backstop_loser", _backstop)])


def _fk_child(backend: str, ms: list[dict]) -> str:
    """How long a child row's insert waited on the parent row a rebuild held locked FOR its strength."""
    waited = sum(bool(m["child_waited"]) for m in ms)
    events = sorted({m["child_wait_event"] for m in ms if m["child_wait_event"]})
    return (f"FOR {ms[0]['lock_strength']} ({backend}): a child row referencing the company took "
            f"{_seconds(_median(m['child_during']['seconds'] for m in ms))} while a rebuild held the parent for "
            f"{ms[0]['hold_s']:g} s (alone: {_seconds(_median(m['child_idle']['seconds'] for m in ms))}); "
            f"it waited in {_of(waited, len(ms))}" + (f" ({', '.join(events)})" if events else ""))


def _no_parent(backend: str, ms: list[dict]) -> str:
    """What two overlapping rebuilds left of a company without a parent row, with the lock alone and with the
    parent inserted first."""
    return (f"a company with no parent row ({backend}): the lock alone locked nothing and two "
            f"overlapping rebuilds ended {_states(m['lock_only']['company'] for m in ms)}; with the parent "
            f"inserted first (ON CONFLICT DO NOTHING, then the lock) {_states(m['create']['company'] for m in ms)}")


def _states(states) -> str:
    counts: dict[str, int] = {}
    for state in states:
        counts[state] = counts.get(state, 0) + 1
    total = sum(counts.values())
    return ", ".join(f"{state} {n}/{total}" for state, n in sorted(counts.items()))


def _backstop(backend: str, ms: list[dict]) -> str:
    """What the loser of two overlapping rebuilds saw, and whether the marker excluded or only detected."""
    runs = [m["runs"][1] for m in ms]
    failed = [r for r in runs if r["outcome"] != "committed"]
    untouched = sum(m["loser_deleted"] is None and not m["torn"] for m in ms)
    errors = sorted({f"{r['error']} ({r['sqlstate']})" for r in failed})
    text = (f"{backend}: the second of two overlapping rebuilds waited "
            f"{_seconds(_median(r['waited'] for r in runs))} on the first's marker, then "
            + (f"failed in {_of(len(failed), len(ms))}: {'; '.join(errors)}" if failed else
               f"rebuilt in {_of(len(ms), len(ms))}"))
    text += (f"; it touched no row while the first wrote in {_of(untouched, len(ms))} (observer saw "
             f"{sorted({n for m in ms for n in m['rows_seen']})}), so it excludes while the first writes"
             + (" and then only refuses: the second rebuild is dropped, not done after" if failed else ""))
    later = sum(m["later_rebuild"] == "committed" for m in ms)
    return text + f"; a rebuild after both went through in {_of(later, len(ms))}"


# --- A queue, an idempotent rebuild, the lock on the writes' connection, Kafka -----------------------------

def neighbours(frame: pd.DataFrame) -> str | None:
    return _measured(frame, [("queue_exclusion", _queue), ("throughput", _throughput),
                             ("same_inputs", _same_inputs), ("different_inputs", _different_inputs)], "; " + KAFKA)


def _queue(backend: str, ms: list[dict]) -> str:
    """What the queue handed out: companies rebuilt, none twice, and what a run asking for a held company got."""
    dup = sum(len(m["duplicates"]) for m in ms)
    second = [m["second_asks"] for m in ms]
    new = [m["second_asks_new_job"] for m in ms if "second_asks_new_job" in m]
    return (f"{backend}: {ms[0]['runs']} runs pulled {_count(_median(m['rebuilt'] for m in ms))} of "
            f"{ms[0]['companies']} companies ({_count(_median(m['per_s'] for m in ms))}/s), "
            f"{dup} given to two runs, {_of(sum(m['intact'] for m in ms), len(ms))} trials all intact; a run asking "
            f"for a company another held: {_states(s['outcome'] for s in second)} after "
            f"{_seconds(_median(s['waited'] for s in second))}"
            + (f" (while the company's job row was still the other run's uncommitted insert: "
               f"{_states(s['outcome'] for s in new)} after {_seconds(_median(s['waited'] for s in new))})"
               if new else ""))


def _same_inputs(backend: str, ms: list[dict]) -> str:
    """Whether two overlapping idempotent rebuilds of the same inputs left the same rows."""
    return (f"{backend}, same inputs: two overlapping rebuilds left the same {_rows(ms)} rows in "
            f"{_of(sum(bool(m['identical']) for m in ms), len(ms))} trials (overlapping after the delete "
            f"and before the commit)")


def _different_inputs(backend: str, ms: list[dict]) -> str:
    """Whose rows an idempotent rebuild of different inputs kept: the last committer's, even the older run's."""
    overlaps = [(p, o) for m in ms for p, o in m["overlaps"].items()]
    last = sum(bool(o["tags_as_expected"]) for _, o in overlaps)
    lost = [p for m in ms for p, kept in m["newest_kept"].items() if not kept]
    return (f"{backend}, different inputs (each run's own, as in the post's overlap): the company held the "
            f"last committer's rows in {_of(last, len(overlaps))} overlaps, and the newer run's output was "
            f"overwritten by the older run's in {_of(len(lost), len(overlaps))}"
            + (f" (held {', '.join(sorted(set(lost))).replace('_', ' ')})" if lost else ""))


def _rows(ms: list[dict]) -> str:
    finals = sorted({o["final"]["rows"] for m in ms for o in m["overlaps"].values()})
    return "/".join(map(str, finals))


def _precision(ms: list[dict]) -> str:
    """How the repetitions were ended, where the run recorded it (older runs repeated a fixed count): each trial's
    repetitions, and the rule (lab/measures/precision.py) on the speedups."""
    if not all(m.get("precision") for m in ms):
        return ""
    first = ms[0]["precision"]
    settles = all("settled" in m["precision"] for m in ms)  # older runs repeated without that stop
    settled = sum(bool(m["precision"].get("settled")) for m in ms)
    capped = sum(not m["precision"]["reached"] for m in ms) - settled
    return (f", {'/'.join(str(m['reps']) for m in ms)} by trial: until both speedups lie within "
            f"+-{first['tolerance']:.0%} of their median"
            + (", or once more could not change the verdict (the ranges overlap, every worker's writes in flight)"
               if settles else "")
            + f", at least {first['floor']}, at most {first['cap']}"
            + (f"; {settled} stopped as settled" if settled else "") + (f"; {capped} at the cap" if capped else ""))


def _throughput(backend: str, ms: list[dict]) -> str:
    """Companies per second by workers, for the backend and xact, medians over every repetition of every trial."""
    def by_workers(key: str) -> str:
        rows: dict = {}
        for m in ms:
            for r in m[key]:
                rows.setdefault(r["workers"], []).extend(r["per_s"])
        return ", ".join(f"{w}: {statistics.median(v):.0f}" for w, v in sorted(rows.items()))

    def peak(key: str) -> str:
        top = max(r["workers"] for r in ms[0][key])
        return f"{max(r['in_flight_peak'] for m in ms for r in m[key] if r['workers'] == top)} of {top}"

    mine = [s for m in ms for s in m["speedups"]]
    base = [s for m in ms for s in m["baseline_speedups"]]
    words = ("below" if max(mine) < min(base) else "above" if min(mine) > max(base) else
             "within the noise of")
    reps = sum(m["reps"] for m in ms)
    baseline = ms[0]["baseline_backend"]
    return (f"{backend}{' (workers ask the queue for their next company)' if ms[0]['hands_out'] else ''}: "
            f"companies/s by workers {by_workers('backend')} against {baseline}'s {by_workers('baseline')} "
            f"(medians of {reps} paired repetitions{_precision(ms)}); writes in flight at once: {peak('backend')} workers against "
            f"{baseline}'s {peak('baseline')}; its speedup from 1 to 4 workers, {min(mine):.2f}-{max(mine):.2f}, "
            f"is {words} {baseline}'s {min(base):.2f}-{max(base):.2f}")
