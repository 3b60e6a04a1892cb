"""The reproduction scorecard: every figure the post published beside ours, in one table (issue 30 item 3).

Each row is a ScoreRow: the figure and where the post gives it, the post's value (lab/report/published.py),
ours read from the run's trials by the same functions the figure's own section uses (session, timing,
company, costs, netdrop), and a Verdict computed under the tolerance the row states. Every verdict but
*matches* carries the flag, so no difference, spread or gap goes unmarked.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import pandas as pd

from lab.checkers.outcomes import detection_of, lock_lost, outcome_text
from lab.measures.kinds import Measured
from lab.declarations.post_role import PostRole
from lab.report import company, costs, netdrop, published, session, timing
from lab.report.common import FLAG, Verdict, backend_with_role, md_table, ok_trials, verdict_mark, with_role
from lab.report.sections import RunView, section

# What the scenarios whose figures the scorecard sets beside the post's measure: with none of them run, no scorecard.
MEASURED = (Measured.POST_CASE, Measured.CALIBRATION, Measured.GUARD_TIMING, Measured.LOOKALIKE,
            Measured.KEEPALIVE_DROP, Measured.OVERLAP, Measured.RUN_KILLED, Measured.COST, Measured.WRITE_RULES,
            Measured.CONFLICT_COST)

# The tolerance of each kind of figure, in the words of the section that already judges it.
LINES = "every trial, line for line"
LINES_NO_WAITS = "every trial, line for line, waits aside"
COUNT = "equal, every trial"
OUTCOME = "the post's outcome, every trial"
RATIO = f"ratio within {costs.RATIO_TOLERANCE:.0%}"
SECONDS = "each end within timeout / 10"
SHARE = "within 2 binomial SE"
POLL = "gap <= 2 polls, same share"
KEEPALIVE = "within 1 probe interval + kernel lateness"
VERSION = "equal, to the post's precision"
LEGEND = (
    f"Tolerances: *{LINES}* (*waits aside*: the seconds a run waited are masked, as the post says to compare "
    f"its output \"apart from the waits\"); *{COUNT}*: every trial's count is the post's; *{OUTCOME}*: every "
    f"trial lost the lock where the post says lost (within one poll where it says so), kept it where it says "
    f"held, found what the post says, or failed with the post's error; *{RATIO}*: a ratio "
    f"matches when ours (the median) is within {costs.RATIO_TOLERANCE:.0%} of the post's, differs when every "
    f"repetition's ratio lies more than {costs.RATIO_TOLERANCE:.0%} away on the same side, and is *within noise* "
    f"when our min-max straddles that band (the cost section's *close* / *differs* / *within noise*); "
    f"*{SECONDS}* and *{SHARE}*: the timing section's rule (the post's seconds scaled by our timeout / "
    f"{published.TIMING_TIMEOUT_S:g} s, one unit of timeout / 10 either side; a count of overlaps agrees when its "
    f"proportion is within two binomial standard errors of the post's, exactly where the post saw all or none); *{POLL}*: "
    f"the calibration's rule (a run is within one poll when the lock was free at most two polls after the kill); "
    f"*{KEEPALIVE}*: the network-drop section's rule; *{VERSION}*: 3.13 matches 3.13.x. *not run*: the run holds "
    f"no trial that measures the figure. {FLAG} marks every verdict but *matches*.")


@dataclass(frozen=True)
class ScoreRow:
    """One published figure against ours."""

    key: str  # stable id, for tests and diffs: "overlap/xact/two_runs/rows"
    where: str  # the post's section
    figure: str
    post: str
    ours: str
    verdict: Verdict
    tolerance: str
    # Why ours differs, where the run measured a cause (the machine's cores, a version installed); None: not explained.
    reason: str | None = None

    @property
    def flagged(self) -> bool:
        return self.verdict is not Verdict.MATCHES

    def verdict_cell(self) -> str:
        return verdict_mark(self.verdict)

    def cells(self) -> list[str]:
        return [self.where, self.figure, self.post, self.ours, self.verdict_cell(), self.tolerance]


def _agree(ok: bool) -> Verdict:
    return Verdict.MATCHES if ok else Verdict.DIFFERS


def _of(done: int, total: int) -> str:
    return f"{done} of {total}"


def _lines(lines: list[str]) -> str:
    return " · ".join(lines)


def _span(values: list[float], unit: str = " s", digits: int = 2) -> str:
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return f"{low}{unit}" if low == high else f"{low}-{high}{unit}"


# --- How I measured --------------------------------------------------------------------------------------

def _versions(run: RunView) -> list[ScoreRow]:
    versions = run.meta.get("versions") or {}
    ours = {"postgres": ((run.meta.get("services") or {}).get("postgres") or {}).get("version"),
            "python": versions.get("python"), "sqlalchemy": versions.get("sqlalchemy"),
            "psycopg2": versions.get("psycopg2-binary") or versions.get("psycopg2")}
    names = {"postgres": "PostgreSQL", "python": "Python", "sqlalchemy": "SQLAlchemy", "psycopg2": "psycopg2"}
    rows = []
    for name, post in published.VERSIONS.items():
        mine = ours[name]
        if mine is None:
            verdict, text = Verdict.NOT_RUN, "not recorded"
        else:
            verdict, text = _agree(str(mine).split(".")[:len(post.split("."))] == post.split(".")), str(mine)
        rows.append(ScoreRow(f"setup/{name}", "How I measured", f"{names[name]} version", post, text, verdict,
                             VERSION, f"the version this machine has installed, {mine}, as the run recorded it"))
    return rows


def _calibration(run: RunView) -> list[ScoreRow]:
    figure = "detector check: AUTOCOMMIT holder killed, second session polling for the lock"
    rows = session.calibration_rows(ok_trials(run.frame, Measured.CALIBRATION))
    poll = rows.measures.iloc[0]["poll"] if not rows.empty else 0.05  # the post polled every 50 ms
    post_gaps, post_within = session.post_calibration(poll)
    post = (f"{_of(post_within, len(post_gaps))} within one poll of {poll * 1000:g} ms; gaps "
            f"{_span(post_gaps, digits=3)} after a kill at {published.CALIBRATION_KILL_AT:.2f} s")
    autocommit = _played_by(run, PostRole.METHOD_3)
    if rows.empty:
        return [ScoreRow("calibration/poll", "How I measured", figure, post, f"no calibrate trial of {autocommit}",
                         Verdict.NOT_RUN, POLL)]
    _, _, within, n, same = session.calibration_against_post(rows, poll)
    gaps = [m["gap"] for m in rows.measures if m.get("gap") is not None]
    ours = (f"{_of(within, n)} within one poll"
            + (f"; gaps {_span(gaps, digits=3)} after the measured kill" if gaps else "") + f" ({autocommit})")
    return [ScoreRow("calibration/poll", "How I measured", figure, post, ours, _agree(same), POLL)]


# --- the cases, the timing runs, the lookalikes ------------------------------------------------------------

CASE_WHERE = {"A": "Method 1 result", "B": "Method 3 result", "C": "Method 2 result", "D": "Method 2 result",
              "E": "Method 3: what it does not cover"}


def _case(run: RunView, letter: str) -> ScoreRow:
    ok = ok_trials(run.frame, Measured.POST_CASE)
    expected = published.CASE_LINES[letter]
    figure = f"case {letter}, {published.CASE_TITLES[letter]}: what reproduce_cases.py printed"
    measured = session.case_measured(ok, letter)
    if not measured:
        return ScoreRow(f"cases/{letter}", CASE_WHERE[letter], figure, _lines(expected), "no trial of the case",
                        Verdict.NOT_RUN, LINES)
    matching = session.case_matching(measured, letter)
    ours = f"{_of(matching, len(measured))} trials printed these lines"
    if matching < len(measured):
        first = next(lines for lines in measured if lines != expected)
        ours += f"; one printed: {_lines(first)}"
    return ScoreRow(f"cases/{letter}", CASE_WHERE[letter], figure, _lines(expected), ours,
                    _agree(matching == len(measured)), LINES)


TIMING_WHERE = {PostRole.METHOD_1: "Method 1 result", PostRole.METHOD_3: "Method 3 result"}


def _timing(run: RunView) -> list[ScoreRow]:
    """The default rows' figures, then none of them before the timeout, then the AUTOCOMMIT rows'."""
    rows, before = [], []
    for role, trigger in [k for k in published.TIMING if k[0] == PostRole.METHOD_1]:
        key_rows, stats = _timing_row(run.frame, role, trigger)
        rows += key_rows
        if stats is not None:
            before.append((f"{trigger}/{timing.LABELS[role]}", *stats))
    rows += _before_timeout(before, _played_by(run, PostRole.METHOD_1))
    for role, trigger in [k for k in published.TIMING if k[0] != PostRole.METHOD_1]:
        rows += _timing_row(run.frame, role, trigger)[0]
    return rows


def _timing_row(frame: pd.DataFrame, role: PostRole, trigger: str) -> tuple[list[ScoreRow], tuple | None]:
    """One timing row's published figures against ours, and (overlaps before the timeout, overlaps, timeout)."""
    overlapped, trials, low, high, within = published.TIMING[(role, trigger)]
    label = f"{trigger}/{timing.LABELS[role]}"
    where = TIMING_WHERE[role]
    backend = backend_with_role(frame, role) or role.value
    names = [("overlapped", f"timing runs, {label}: trials in which a short run got the lock",
              f"{overlapped}/{trials} trials", SHARE)]
    if overlapped:
        names += [("range", f"timing runs, {label}: first grant, earliest to latest", f"{low:.2f}-{high:.2f} s",
                   SECONDS),
                  ("within", f"timing runs, {label}: first grants within 1 s of the timeout",
                   f"{within} of {overlapped}", SHARE)]
    ok = ok_trials(frame, Measured.GUARD_TIMING)
    group = ok[(ok.post_role == role) & (ok.variant == trigger)]
    failed = timing.errored_trials(frame, backend, trigger)
    if group.empty or not failed.empty:  # a partly errored row is not a result (the timing section's rule)
        why = f"no timing trial of {backend}/{trigger}" if group.empty else timing.incomplete_text(failed, group)
        return [ScoreRow(f"timing/{label}/{name}", where, figure, post, why, Verdict.NOT_RUN, tol)
                for name, figure, post, tol in names], None
    timeout = group.measures.iloc[0]["timeout_s"]
    scale = timeout / published.TIMING_TIMEOUT_S
    s = timing.group_stats(group, timeout)
    compared = {c.key: c for c in timing.compared_with_post(s, (role, trigger), timeout)}
    rows = []
    for name, figure, post, tol in names:
        if name == "overlapped":
            verdict, ours = _agree(compared["overlapped"].agrees), f"{compared['overlapped'].ours} trials"
        elif not s["overlapped"]:  # the post's overlaps have nothing of ours to compare with
            verdict, ours = Verdict.DIFFERS, "no overlap"
        elif name == "range":
            verdict = _agree(compared["min"].agrees and compared["max"].agrees)
            ours = f"{s['min']:.2f}-{s['max']:.2f} s"
            if scale != 1:
                post += f" (x {scale:g}: {low * scale:.2f}-{high * scale:.2f} s)"
        else:
            verdict, ours = _agree(compared["within"].agrees), f"{s['within']} of {s['overlapped']}"
        rows.append(ScoreRow(f"timing/{label}/{name}", where, figure, post, ours, verdict, tol))
    return rows, (s["before_timeout"], s["overlapped"], timeout)


def _before_timeout(before: list[tuple], default: str) -> list[ScoreRow]:
    """"None got in before 10 seconds", over the default rows that ran (label, before, overlapped, timeout);
    default: the backend playing method 1."""
    figure = "timing runs, default connection: overlaps before the timeout"
    post = f"none (\"None got in before {published.TIMING_TIMEOUT_S:g} seconds\")"
    if not before:
        return [ScoreRow("timing/default/before_timeout", "Method 1 result", figure, post,
                         f"no complete timing row of {default}", Verdict.NOT_RUN, COUNT)]
    timeouts = sorted({t for *_, t in before})
    ours = "; ".join(f"{label}: {_of(n, total)} overlaps" for label, n, total, _ in before)
    if timeouts != [published.TIMING_TIMEOUT_S]:
        ours += f" (timeout {', '.join(f'{t:g}' for t in timeouts)} s)"
    return [ScoreRow("timing/default/before_timeout", "Method 1 result", figure, post, ours,
                     _agree(all(n == 0 for _, n, _, _ in before)), COUNT)]


LOOKALIKE_WHERE = {"idle_session_in_transaction": "How to tell it from a lookalike",
                   "pool_recycle_checked_out": "How to tell it from a lookalike",
                   "close_keeps_lock": "Method 3: what it does not cover"}


def _lookalikes(run: RunView) -> list[ScoreRow]:
    ok = ok_trials(run.frame, Measured.LOOKALIKE)
    rows = []
    for check, (name, post) in timing.LOOKALIKES.items():
        agree, n = timing.lookalike_agreement(ok, check)
        figure = f"lookalike: {name}"
        if not n:
            rows.append(ScoreRow(f"lookalikes/{check}", LOOKALIKE_WHERE[check], figure, post,
                                 "no lookalikes trial", Verdict.NOT_RUN, OUTCOME))
            continue
        rows.append(ScoreRow(f"lookalikes/{check}", LOOKALIKE_WHERE[check], figure, post,
                             f"{_of(agree, n)} trials found what the post says", _agree(agree == n), OUTCOME))
    return rows


def _keepalives(run: RunView) -> list[ScoreRow]:
    ok = ok_trials(run.frame, Measured.KEEPALIVE_DROP)
    rows = []
    for (idle, interval, count), end in published.KEEPALIVE_ENDS.items():
        figure = (f"host loses its network: server keepalives {idle} s / {interval} s / {count} probes, "
                  f"when the server ends the lock's session")
        post = f"{end:,} s{netdrop.long_duration(end)}"
        settings = {"idle": idle, "interval": interval, "count": count}
        records = [r for r in ok.to_dict("records") if r["measures"]["keepalive"]["server"] == settings]
        key = f"netdrop/{idle}-{interval}-{count}"
        if not records:
            rows.append(ScoreRow(key, "Method 3: what it does not cover", figure, post,
                                 "no network-drop trial with these keepalives", Verdict.NOT_RUN, KEEPALIVE))
            continue
        summary = netdrop.ending_summary(records)
        estimates = {r["measures"]["keepalive"]["doctor_estimate_s"] for r in records}
        ours = (f"{summary['median']:.2f} s{netdrop.long_duration(summary['median'])} (median, n={summary['ended']}); "
                f"{_of(summary['agreed'], summary['n'])} within tolerance"
                if summary["ended"] else f"not ended ({summary['n']} trials)")
        rows.append(ScoreRow(key, "Method 3: what it does not cover", figure, post, ours,
                             _agree(estimates == {end} and summary["agreed"] == summary["n"]), KEEPALIVE))
    return rows


# --- Method 4, its rules, the same-faults table ---------------------------------------------------------

def _played_by(run: RunView, role: PostRole) -> str:
    """The backend that plays the post's role in this run (its trials' rows), else the role's own name."""
    return backend_with_role(run.frame, role) or role.value


def _overlap(run: RunView) -> list[ScoreRow]:
    ok = ok_trials(run.frame, Measured.OVERLAP)
    rows = []
    for role in (PostRole.NO_LOCK, PostRole.METHOD_4):
        backend = _played_by(run, role)
        post_lines = published.OVERLAP_LINES[role]
        figure = f"two rebuilds of one company at once, {published.OVERLAP_TITLES[role]}: company_design.py's lines"
        group = ok[(ok.backend == backend) & (ok.variant == "two_runs")]
        key = f"overlap/{backend}/lines"
        if group.empty:
            rows.append(ScoreRow(key, "Method 4 result", figure, _lines(post_lines), f"no overlap trial of {backend}",
                                 Verdict.NOT_RUN, LINES_NO_WAITS))
            continue
        same = sum(company.same_waits_aside(post_lines, company.overlap_lines(m)) for m in group.measures)
        rows.append(ScoreRow(key, "Method 4 result", figure, _lines(post_lines),
                             f"{_of(same, len(group))} trials printed these lines", _agree(same == len(group)),
                             LINES_NO_WAITS))
    where = {PostRole.NO_LOCK: "Method 4 result", PostRole.METHOD_4: "Method 4 result",
             PostRole.SERIALIZABLE: "Why not just...? SERIALIZABLE"}
    for role, post in published.OVERLAP_ROWS.items():
        backend = _played_by(run, role)
        rows.append(_rows_afterwards(ok, backend, "two_runs", post, where[role],
                                     f"two rebuilds of one company at once, {backend}: rows afterwards"))
    rows.append(_rows_afterwards(ok, _played_by(run, PostRole.NO_LOCK), "repeatable_read",
                                 published.REPEATABLE_READ_NO_LOCK_ROWS,
                                 "Why not just...? SERIALIZABLE",
                                 "two rebuilds at once, no lock, REPEATABLE READ: rows afterwards"))
    return rows


def _rows_afterwards(ok: pd.DataFrame, backend: str, variant: str, post: int, where: str, figure: str) -> ScoreRow:
    finals = company.overlap_finals(ok, backend, variant)
    key = f"overlap/{backend}/{variant}/rows"
    if not finals:
        return ScoreRow(key, where, figure, f"{post} rows", f"no {variant} overlap trial of {backend}",
                        Verdict.NOT_RUN, COUNT)
    return ScoreRow(key, where, figure, f"{post} rows", ", ".join(map(str, finals)) + " rows",
                    _agree(company.overlap_matches(finals, post)), COUNT)


def _kill(run: RunView) -> list[ScoreRow]:
    ok = ok_trials(run.frame, Measured.RUN_KILLED)
    group = with_role(ok, PostRole.METHOD_4)
    lock = _played_by(run, PostRole.METHOD_4)
    figure = f"{lock}: a run killed after its delete, before its commit, a second run waiting"
    post = _lines(published.KILL_LINES)
    if group.empty:
        return [ScoreRow(f"kill/{lock}", "Method 4 result", figure, post, f"no kill trial of {lock}", Verdict.NOT_RUN,
                         LINES_NO_WAITS)]
    same = sum(company.same_waits_aside(published.KILL_LINES, company.kill_lines(m)) for m in group.measures)
    waits = [m["runs"][1]["waited"] for m in group.measures]
    return [ScoreRow(f"kill/{lock}", "Method 4 result", figure, post,
                     f"{_of(same, len(group))} trials printed these lines (the waiter waited "
                     f"{_span(waits, digits=1)})", _agree(same == len(group)), LINES_NO_WAITS)]


def _repeatable_read(run: RunView) -> list[ScoreRow]:
    rr = company.repeatable_read_failures(ok_trials(run.frame, Measured.OVERLAP))
    lock = _played_by(run, PostRole.METHOD_4)
    figure = "rule 1: the lock under REPEATABLE READ, the waiting run"
    post = f"fails the delete after the wait with *{published.REPEATABLE_READ_ERROR}*"
    if lock not in rr:
        return [ScoreRow("rules/repeatable_read", "Rules it depends on", figure, post,
                         f"no REPEATABLE READ overlap trial of {lock}", Verdict.NOT_RUN, OUTCOME)]
    failed, n, waits = rr[lock]
    return [ScoreRow("rules/repeatable_read", "Rules it depends on", figure, post,
                     f"{lock}: {_of(failed, n)} trials failed with it, after a median wait of "
                     f"{statistics.median(waits):.1f} s", _agree(failed == n), OUTCOME)]


def _sorted_order(run: RunView) -> list[ScoreRow]:
    deadlocks, n = company.deadlocks_of(ok_trials(run.frame, Measured.WRITE_RULES), "sorted_batches")
    figure = "rule 4: several companies locked in sorted order, runs aborted by deadlock"
    post = f"{published.SORTED_DEADLOCKS} (\"two runs cannot deadlock\")"
    if not n:
        return [ScoreRow("rules/sorted", "Rules it depends on", figure, post, "no sorted_batches rules trial",
                         Verdict.NOT_RUN, COUNT)]
    return [ScoreRow("rules/sorted", "Rules it depends on", figure, post, f"{deadlocks} in {n} trials",
                     _agree(deadlocks == published.SORTED_DEADLOCKS), COUNT)]


METHODS = {PostRole.METHOD_1: "1. default", PostRole.METHOD_2: "2. commit after acquiring",
           PostRole.METHOD_3: "3. AUTOCOMMIT"}


def _same_faults(run: RunView) -> list[ScoreRow]:
    relevant = session.same_faults_trials(run.frame)
    rows = []
    for (variant, role), lost in published.SAME_FAULTS_FOLLOWS.items():
        backend = _played_by(run, role)
        figure = f"{session.FAULT_ROWS[variant]}, {METHODS[role]} (the post's *follows*: reasoned, not run)"
        post = published.SAME_FAULTS[variant][role]
        key = f"same_faults/{variant}/{backend}"
        raw = session.same_fault_cell(relevant, variant, backend)
        if not raw:
            rows.append(ScoreRow(key, "All four under the same faults", figure, post, f"no trial of {backend}",
                                 Verdict.NOT_RUN, OUTCOME))
            continue
        as_post = [lock_lost(r) == lost and (variant != "terminate" or detection_of(r) == "within one poll")
                   for r in raw]
        ours = f"{outcome_text(session.same_fault_records(relevant, variant, backend))} ({backend})"
        rows.append(ScoreRow(key, "All four under the same faults", figure, post, ours, _agree(all(as_post)), OUTCOME))
    return rows


# --- costs -----------------------------------------------------------------------------------------------

def _perf(run: RunView) -> list[ScoreRow]:
    ok = ok_trials(run.frame, Measured.COST)
    seconds = published.PERF_SECONDS
    pairs = [(v, costs.PERF_BASE) for v in seconds if v != costs.PERF_BASE]
    pairs.append(("per_company_lock", "transaction_per_company"))  # "The lock adds no measurable cost"
    rows = []
    for variant, base in pairs:
        post_ratio = costs.post_perf_ratio(variant, base)
        figure = f"cost: {published.PERF_LABELS[variant]}, over {published.PERF_LABELS[base]}"
        post = f"{seconds[variant]:.1f} s / {seconds[base]:.1f} s = {post_ratio:.2f}"
        key = f"perf/{variant}/{base}"
        ratios = costs.paired_ratios(ok, variant, base)
        verdict = costs.ratio_verdict(ratios, post_ratio)
        if verdict is None:
            rows.append(ScoreRow(key, "Method 4: what it costs", figure, post,
                                 f"no perf trials of {variant} and {base}", Verdict.NOT_RUN, RATIO))
            continue
        companies = ok.measures.iloc[0]["companies"]
        ours = (f"{costs.ratio_summary(ratios)} ({len(ratios)} repetitions of {companies} companies; "
                f"the post: {published.PERF_COMPANIES})")
        rows.append(ScoreRow(key, "Method 4: what it costs", figure, post, ours, verdict, RATIO,
                             _fewer_cores(run, variant)))
    return rows


def _fewer_cores(run: RunView, variant: str) -> str | None:
    """Where a configuration ran more workers than this machine had cores (meta.json's machine): its workers shared
    them, and the post's speed-up could not happen here."""
    cores = (run.meta.get("machine") or {}).get("cores")
    workers = next((int(p) for p in variant.split("_") if p.isdigit()), None) if variant.startswith("workers") else None
    if not cores or workers is None or workers <= cores:
        return None
    return f"{workers} workers shared this machine's {cores} cores (the post's speed-up needs a core each)"


def _conflicts(run: RunView) -> list[ScoreRow]:
    ok = ok_trials(run.frame, Measured.CONFLICT_COST)
    rows = []
    for design, label in costs.DESIGN_LABELS.items():
        post = published.CONFLICT_FAILURES[design]
        counts = costs.conflict_counts(ok, design)
        figure = f"SERIALIZABLE, 8 different companies at once, {label}: failed"
        key = f"conflicts/{design}"
        if not counts:
            rows.append(ScoreRow(key, "Why not just...? SERIALIZABLE", figure, f"{post} of 8",
                                 f"no conflicts trial of {design}", Verdict.NOT_RUN, COUNT))
            continue
        rows.append(ScoreRow(key, "Why not just...? SERIALIZABLE", figure, f"{post} of 8",
                             ", ".join(map(str, counts)) + " of 8", _agree(set(counts) == {post}), COUNT))
    ten, names = costs.ten_companies(ok), costs.ten_names(ok)
    serializable, lock = costs.TEN_COMPANIES
    figure = "the same 10 companies, SERIALIZABLE against the lock: time ratio"
    post_s = {role: published.TEN_COMPANIES[role][0] for role in costs.TEN_COMPANIES}
    post_text = f"{post_s[serializable]} s / {post_s[lock]} s = {costs.post_ten_ratio():.2f}"
    ratio = costs.ten_companies_ratio(ten)
    if ratio is None:
        rows.append(ScoreRow("conflicts/ten/ratio", "Why not just...? SERIALIZABLE", figure, post_text,
                             f"no ten_companies trials of {names[serializable]} and {names[lock]}", Verdict.NOT_RUN,
                             RATIO))
    else:
        centre, every = ratio
        first = ten[serializable][0]
        medians = {role: statistics.median(m["seconds"] for m in ten[role]) for role in costs.TEN_COMPANIES}
        rows.append(ScoreRow(
            "conflicts/ten/ratio", "Why not just...? SERIALIZABLE", figure, post_text,
            f"{medians[serializable]:.2f} s / {medians[lock]:.2f} s = {centre:.2f} (medians; any trial over any: "
            f"{_span(every, unit='')}; {first['workers']} runs, {first['rows']} rows a company, a workload the post "
            f"does not give)", costs.ten_companies_verdict(ratio), RATIO))
    for role in costs.TEN_COMPANIES:
        backend = names[role]
        post_failed = published.TEN_COMPANIES[role][1]
        figure = f"the same 10 companies, {backend}: failed attempts"
        key = f"conflicts/ten/{backend}/failed"
        if role not in ten:
            rows.append(ScoreRow(key, "Why not just...? SERIALIZABLE", figure, str(post_failed),
                                 f"no ten_companies trial of {backend}", Verdict.NOT_RUN, COUNT))
            continue
        failed = [m["failed_attempts"] for m in ten[role]]
        rows.append(ScoreRow(key, "Why not just...? SERIALIZABLE", figure, str(post_failed),
                             ", ".join(map(str, failed)), costs.failed_attempts_verdict(ten, role), COUNT))
    return rows


def scorecard_rows(run: RunView) -> list[ScoreRow]:
    """Every published figure, in the post's order."""
    return [*_versions(run), *_calibration(run), _case(run, "A"), *_timing(run), *_lookalikes(run),
            _case(run, "C"), _case(run, "D"), _case(run, "B"), _case(run, "E"), *_keepalives(run),
            *_overlap(run), *_kill(run), *_perf(run), *_repeatable_read(run), *_sorted_order(run),
            *_same_faults(run), *_conflicts(run)]


def not_reproduced(rows: list[ScoreRow]) -> list[str]:
    """Each figure that differs from the post's, with the cause the run measured, or 'not explained'."""
    return [f"- *{r.figure}*: post {r.post}, ours {r.ours.split(' (')[0]}; {r.reason or 'not explained'}."
            for r in rows if r.verdict is Verdict.DIFFERS]


def counts_line(rows: list[ScoreRow]) -> str:
    counts = {v: sum(r.verdict is v for r in rows) for v in Verdict}
    return (f"{len(rows)} figures: {counts[Verdict.MATCHES]} match, {counts[Verdict.DIFFERS]} differ, "
            f"{counts[Verdict.WITHIN_NOISE]} within noise, {counts[Verdict.NOT_RUN]} not run.")


@section(15)
def section_scorecard(run: RunView) -> str | None:
    if not run.frame.measured.isin(MEASURED).any():
        return None
    rows = scorecard_rows(run)
    return "\n".join([
        "## Scorecard: the post's figures against ours", "",
        "Every figure the post publishes, where it gives it, and ours from this run's trials (the sections below "
        "show each in full). " + counts_line(rows) + " A difference is not necessarily the post's error: the "
        "machine, the scale and the versions differ (the first rows), and each section below says what it knows "
        "of why.", "",
        LEGEND, "",
        md_table(["where in the post", "figure", "post", "ours", "verdict", "tolerance"], [r.cells() for r in rows]),
        "", *(["Not reproduced, each with the cause this run measured or *not explained*:", "",
               *not_reproduced(rows), ""] if not_reproduced(rows) else [])])
