"""Report sections for the session locks: the post's cases A-E, the same-faults matrix, calibration."""

from __future__ import annotations

import pandas as pd

from lab.checkers.outcomes import detection_of, outcome_text
from lab.measures.kinds import Measured
from lab.declarations.post_role import PostRole
from lab.report import published
from lab.report.common import backend_with_role, md_table, ok_trials, side_by_side, with_role
from lab.decision.cells import CALIBRATION_WORDS as LOST_WORDS
from lab.report.sections import RunView, measured_section, section

# The post's three session-lock methods, by the role a backend declares (lab/declarations/post_role.py).
SESSION_ROLES = (PostRole.METHOD_1, PostRole.METHOD_2, PostRole.METHOD_3)


def session_backends(frame: pd.DataFrame) -> list[str]:
    """The backends playing the post's methods 1-3 among the frame's rows, in the methods' order."""
    return [name for role in SESSION_ROLES if (name := backend_with_role(frame, role)) is not None]
FAULT_ROWS = {
    "idle_in_transaction": "Lock connection idle past idle_in_transaction_session_timeout",
    "query_then_idle_in_transaction": "One more query, then idle past that timeout",
    "idle_session": "Lock connection idle past idle_session_timeout",
    "terminate": "Holder's session killed (pg_terminate_backend)",
}


def case_lines(measures: dict) -> list[str]:
    """A cases trial printed the way the post's reproduce_cases.py printed it."""
    lines = [f"acquired: {measures['acquired']}, holder state: {measures['holder_state']}"]
    lines += [f"t={p['t']}s other process gets lock: {p['got']}" for p in measures["probes"]]
    if measures["next_query"] == "alive":
        lines.append("holder: alive")
    else:
        lines.append(f"holder's next query fails: {measures['next_query']}")
    return lines


def on_server(ok: pd.DataFrame, server: str) -> pd.DataFrame:
    """The cases trials whose lock was on this server (a trial recorded before the field existed: PostgreSQL)."""
    if ok.empty:
        return ok
    return ok[ok.measures.map(lambda m: m.get("lock_server", "postgres") == server).astype(bool)]


def case_rows(ok: pd.DataFrame, letter: str, server: str = "postgres") -> pd.DataFrame:
    """The trials of one of the post's cases on one server's lock (ok: the run's ok cases trials)."""
    ok = on_server(ok, server)
    return ok if ok.empty else ok[ok.measures.map(lambda m, letter=letter: m.get("case") == letter).astype(bool)]


def case_measured(ok: pd.DataFrame, letter: str) -> list[list[str]]:
    """The lines every trial of a case printed on PostgreSQL, the post's server (ok: the run's ok cases trials);
    empty when it did not run."""
    if ok.empty:
        return []
    rows = case_rows(ok, letter)
    return [case_lines(m) for m in rows.measures]


def case_matching(measured: list[list[str]], letter: str) -> int:
    """How many trials printed exactly the post's lines for the case."""
    return sum(lines == published.CASE_LINES[letter] for lines in measured)


@section(40)
def section_cases(run: RunView) -> str | None:
    frame = run.frame
    ok = on_server(ok_trials(frame, Measured.POST_CASE), "postgres")  # MariaDB's: lab/report/mariadb.py
    if ok.empty:
        return None
    intro = ["## The post's cases A to E", "",
             "Each case holds a session advisory lock under one idle guard; a second session tries for it "
             "at t=1 and t=5 (in units of a third of the timeout, so the post's 3 s timeout gives its 1 s and 5 s). "
             "Lines are printed in the post's format; *match* means every trial printed the post's lines. "
             "Reproduce: `lab run --scenario cases`.", ""]
    out, summary = [], []
    for letter, title in published.CASE_TITLES.items():
        rows = case_rows(ok, letter)
        if rows.empty:
            summary.append([letter, title, "not run", "", ""])
            continue
        expected = published.CASE_LINES[letter]
        measured = case_measured(ok, letter)
        matching = case_matching(measured, letter)
        first = rows.measures.iloc[0]
        verdict = "match" if matching == len(measured) else "MISMATCH"
        reason = "" if verdict == "match" else ": check the server's version and where its guard is set"
        summary.append([letter, title, f"{verdict} ({matching}/{len(measured)} trials){reason}",
                        f"{first['timeout_s']:.1f} s {first['setting']}", first.get("server_said") or "-"])
        out += [f"### {letter}. {title}", "", *side_by_side(expected, measured[0]), ""]
    table = md_table(["case", "method", "ours vs post", "guard set on the lock's session",
                      "server log said"], summary)
    return "\n".join(intro + [table, ""] + out)


def same_faults_trials(frame: pd.DataFrame) -> pd.DataFrame:
    """The cases and calibrate trials of the three session locks: the post's same-faults table, measured."""
    return frame[frame.measured.isin([Measured.POST_CASE, Measured.CALIBRATION]) & frame.post_role.isin(SESSION_ROLES)
                 & (frame.variant != "-")]


def same_fault_cell(relevant: pd.DataFrame, variant: str, backend: str) -> list[dict]:
    """One cell's trial records as recorded (relevant: same_faults_trials)."""
    return relevant[(relevant.variant == variant) & (relevant.backend == backend)].to_dict("records")


def same_fault_records(relevant: pd.DataFrame, variant: str, backend: str) -> list[dict]:
    """One cell's trial records, calibration verdicts in the matrix's words (for outcome_text)."""
    return [{**r, "verdict": LOST_WORDS.get(r["verdict"], r["verdict"])}
            if r["measured"] == Measured.CALIBRATION else r for r in same_fault_cell(relevant, variant, backend)]


@section(60)
def section_same_faults(run: RunView) -> str | None:
    frame = run.frame
    relevant = same_faults_trials(frame)
    if relevant.empty:
        return None
    present = session_backends(relevant)
    roles = dict(zip(relevant.backend, relevant.post_role))
    rows = []
    for variant, label in FAULT_ROWS.items():
        row = [label]
        for backend in present:
            records = same_fault_records(relevant, variant, backend)
            ours = outcome_text(records) if records else "not run"
            post = published.SAME_FAULTS[variant].get(roles[backend], "")
            row.append(f"{ours} (post: {post})")
        rows.append(row)
    return "\n".join(["## The session locks under the same faults", "",
                      "The post's table *All four under the same faults*, session-lock columns, every cell "
                      "measured here, including those the post marks *follows* (reasoned, not run). "
                      "`lost n/N` counts trials in which another run got the lock while the holder "
                      "still believed it held it. Reproduce: `lab run --scenario cases,calibrate`.", "",
                      md_table(["fault", *present], rows), ""])


CALIBRATION_WORDS = {"within one poll": "within one poll", "late": "**late**", "not detected": "**never detected**"}


def calibration_line(i: int, m: dict, verdict: str) -> str:
    """One calibration run with the measured kill time (not the scheduled one) and the gap after it."""
    killed = "not killed" if m.get("killed_at") is None else f"{m['killed_at']:.3f}s"
    got = "never" if m["got_at"] is None else f"{m['got_at']:.3f}s"
    gap = "" if m.get("gap") is None else f"gap {m['gap']:.3f}s: "
    return f"run {i}: killed at {killed}, second session got the lock at {got} ({gap}{verdict})"


def post_calibration(poll: float) -> tuple[list[float], int]:
    """The post's gaps (got the lock minus its 2.00 s kill) and how many were within one poll (two polls)."""
    gaps = [round(t - published.CALIBRATION_KILL_AT, 4) for t in published.CALIBRATION_GOT_AT]
    return gaps, sum(g <= 2 * poll for g in gaps)


@measured_section(70, Measured.CALIBRATION)
def section_calibration(run: RunView, ok: pd.DataFrame) -> str | None:
    poll = ok.measures.iloc[0]["poll"]
    out = ["## Calibration: does the detector see a loss?", "",
           f"The holder's session is killed with pg_terminate_backend, scheduled at "
           f"{published.CALIBRATION_KILL_AT:.2f} s (the lines show the measured kill); a second session polls "
           f"for the lock every {poll * 1000:g} ms, on a grid of its own (each run a different phase). *Within one "
           f"poll*: the second session got the lock at most two polls ({2 * poll:.2f} s) after the measured kill, "
           f"the next poll's start plus its run; later is *late*, never is *never detected*: both are failures of "
           f"the detector. Every one of these is a lost lock. Reproduce: `lab run --scenario calibrate`.", ""]
    calibrated_as_post = backend_with_role(ok, PostRole.METHOD_3)
    for backend in session_backends(ok):
        rows = calibration_rows(ok, backend)
        verdicts = [detection_of(r) for r in rows.to_dict("records")]
        lines = [calibration_line(i, m, "unrecorded" if v is None else CALIBRATION_WORDS.get(v, v))
                 for i, (m, v) in enumerate(zip(rows.measures, verdicts))]
        within = verdicts.count("within one poll")
        failed = [f"{CALIBRATION_WORDS.get(v, v)} in {verdicts.count(v)}" for v in ("late", "not detected")
                  if v in verdicts]
        out += [f"**{backend}**: within one poll in {within} of {len(rows)} runs"
                + ("; " + "; ".join(failed) if failed else "") + ".", ""]
        if backend == calibrated_as_post:
            out += [*_against_post(rows, poll), ""]
        else:
            out += ["```", *[line.replace("**", "") for line in lines], "```"]
        out.append("")
    return "\n".join(out)


def calibration_rows(ok: pd.DataFrame, backend: str | None = None) -> pd.DataFrame:
    """A backend's ok calibrate trials in run order; by default the post's own, which calibrated on an AUTOCOMMIT
    connection (method 3)."""
    if backend is None:
        return with_role(ok, PostRole.METHOD_3).sort_values("index")
    return ok[ok.backend == backend].sort_values("index")


def calibration_against_post(rows: pd.DataFrame, poll: float) -> tuple[int, int, int, int, bool]:
    """(post within one poll, post runs, ours within one poll, our runs, same proportion): a run is within
    one poll when its gap is at most two polls, on both sides."""
    _, post_within = post_calibration(poll)
    within = [detection_of(r) for r in rows.to_dict("records")].count("within one poll")
    n, post_n = len(rows), len(published.CALIBRATION_GOT_AT)
    return post_within, post_n, within, n, within * post_n == post_within * n


def _against_post(rows: pd.DataFrame, poll: float) -> list[str]:
    """The post's five runs beside ours, each judged by the same tolerance: detected within two polls."""
    gaps, post_within = post_calibration(poll)
    table = ["| # | post: killed at, got the lock at (gap) | measured: killed at, got the lock at (gap) | |",
             "|---|---|---|---|"]
    detected = [detection_of(r) for r in rows.to_dict("records")]
    ours = list(zip(rows.measures, detected))
    for i in range(max(len(gaps), len(ours))):
        post = (f"{published.CALIBRATION_KILL_AT:.2f}s, {published.CALIBRATION_GOT_AT[i]:.3f}s ({gaps[i]:.3f}s)"
                if i < len(gaps) else "")
        measured, mark = "", ""
        if i < len(ours):
            m, verdict = ours[i]
            killed = "not killed" if m.get("killed_at") is None else f"{m['killed_at']:.3f}s"
            got = "never" if m["got_at"] is None else f"{m['got_at']:.3f}s"
            measured = f"{killed}, {got}" + ("" if m.get("gap") is None else f" ({m['gap']:.3f}s)")
            word = "unrecorded" if verdict is None else CALIBRATION_WORDS.get(verdict, verdict)
            mark = word + ("" if verdict == "within one poll" else " (differs)")
        table.append(f"| {i} | {post} | {measured} | {mark} |")
    _, _, within, _, same = calibration_against_post(rows, poll)
    verdict = ("matches the post" if same else "**differs from the post**")
    return [*table, "",
            f"Against the post: {post_within} of {len(gaps)} of its runs within one poll, {within} of {len(rows)} "
            f"of ours: {verdict} (tolerance: a run is within one poll when its gap is at most two polls, "
            f"{2 * poll:.2f} s; the post timed from its scheduled kill, we from the measured one)."]
