"""Report sections for the session locks: the post's cases A-E, the same-faults matrix, calibration."""

from __future__ import annotations

import pandas as pd

from lab import published
from lab.outcomes import outcome_text
from lab.report.common import md_table, ok_trials, side_by_side

SESSION_BACKENDS = ["session", "session_commit", "session_autocommit"]
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


def section_cases(frame: pd.DataFrame) -> str | None:
    ok = ok_trials(frame, "cases")
    if ok.empty:
        return None
    intro = ["## The post's cases A to E", "",
             "Each case holds a session advisory lock under one idle guard; a second session tries for it "
             "at t=1 and t=5 (in units of a third of the timeout, so the post's 3 s timeout gives its 1 s and 5 s). "
             "Lines are printed in the post's format; *match* means every trial printed the post's lines. "
             "Reproduce: `lab run --scenario cases`.", ""]
    out, summary = [], []
    for letter, title in published.CASE_TITLES.items():
        rows = ok[ok.measures.map(lambda m, letter=letter: m.get("case") == letter)]
        if rows.empty:
            summary.append([letter, title, "not run", "", ""])
            continue
        expected = published.CASE_LINES[letter]
        measured = [case_lines(m) for m in rows.measures]
        matching = sum(lines == expected for lines in measured)
        first = rows.measures.iloc[0]
        verdict = "match" if matching == len(measured) else "MISMATCH"
        reason = "" if verdict == "match" else ": check the server's version and where its guard is set"
        summary.append([letter, title, f"{verdict} ({matching}/{len(measured)} trials){reason}",
                        f"{first['timeout_s']:.1f} s {first['setting']}", first.get("server_said") or "-"])
        out += [f"### {letter}. {title}", "", *side_by_side(expected, measured[0]), ""]
    table = md_table(["case", "method", "ours vs post", "guard set on the lock's session",
                      "server log said"], summary)
    return "\n".join(intro + [table, ""] + out)


def section_same_faults(frame: pd.DataFrame) -> str | None:
    relevant = frame[frame.scenario.isin(["cases", "calibrate"]) & frame.backend.isin(SESSION_BACKENDS)
                     & (frame.variant != "-")]
    if relevant.empty:
        return None
    present = [b for b in SESSION_BACKENDS if b in set(relevant.backend)]
    rows = []
    for variant, label in FAULT_ROWS.items():
        row = [label]
        for backend in present:
            cell = relevant[(relevant.variant == variant) & (relevant.backend == backend)]
            ours = outcome_text(cell.to_dict("records")) if not cell.empty else "not run"
            if variant == "terminate" and ours.startswith("within one poll"):
                ours = "lost " + ours
            post = published.SAME_FAULTS[variant].get(backend, "")
            row.append(f"{ours} (post: {post})")
        rows.append(row)
    return "\n".join(["## The session locks under the same faults", "",
                      "The post's table *All four under the same faults*, session-lock columns, every cell "
                      "measured here, including those the post marks *follows* (reasoned, not run). "
                      "`lost n/N` counts trials in which another run got the lock while the holder "
                      "still believed it held it. Reproduce: `lab run --scenario cases,calibrate`.", "",
                      md_table(["fault", *present], rows), ""])


def section_calibration(frame: pd.DataFrame) -> str | None:
    ok = ok_trials(frame, "calibrate")
    if ok.empty:
        return None
    out = ["## Calibration: does the detector see a loss?", "",
           f"The holder's session is killed with pg_terminate_backend at "
           f"{published.CALIBRATION_KILL_AT:.2f} s; a second session polls for the lock every 50 ms, "
           f"on a grid of its own (each run a different phase). Reproduce: `lab run --scenario calibrate`.", ""]
    for backend in [b for b in SESSION_BACKENDS if b in set(ok.backend)]:
        rows = ok[ok.backend == backend].sort_values("index")
        lines = []
        for i, m in enumerate(rows.measures):
            got = "never" if m["got_at"] is None else f"{m['got_at']:.3f}s"
            # The post prints the scheduled kill time; the measured one is in trials.jsonl (killed_at).
            killed = "not killed" if m["killed_at"] is None else f"{m['kill_at']:.2f}s"
            lines.append(f"run {i}: killed at {killed}, second session got the lock at {got}")
        within = sum(v == "within one poll" for v in rows.verdict)
        out += [f"**{backend}**: within one poll (by {published.CALIBRATION_KILL_AT + 0.10:.2f} s) "
                f"in {within} of {len(rows)} runs.", ""]
        if backend == "session_autocommit":
            post = [f"run {i}: killed at {published.CALIBRATION_KILL_AT:.2f}s, second session got the lock "
                    f"at {t:.3f}s" for i, t in enumerate(published.CALIBRATION_GOT_AT)]
            out += side_by_side(post, lines, mask=lambda line: line.split(" got the lock")[0])
        else:
            out += ["```", *lines, "```"]
        out.append("")
    return "\n".join(out)
