"""A real network drop: when the server ended the holder's dropped session, beside lab doctor's figure.

Reads the netdrop scenario's trials. "agrees" is computed, never typed: a trial agrees when the
measured end is within one probe interval of the doctor's idle + count x interval, plus the most the
kernel's timer wheel may delay those timers (measured by the trial; 131 s for the 7200 s default
at HZ=250, a third of a second for tuned values).
"""

from __future__ import annotations

import statistics

import pandas as pd

from lab.checkers.keepalive import ends_as_estimated
from lab.measures.kinds import Measured
from lab.report.common import md_table
from lab.report.sections import RunView, measured_section

VARIANT_LABELS = {
    "server_keepalives": "holder's libpq as it comes",
    "client_keepalives": "holder's libpq keepalives tuned",
    "client_user_timeout": "holder's libpq tcp_user_timeout",
    "os_defaults": "server keepalives at the OS defaults",
}


def _settings(keepalive: dict) -> str:
    s = keepalive["server"]
    return f"{s['idle']} s / {s['interval']} s / {s['count']}"


def ending_summary(records: list[dict]) -> dict:
    """When the server ended the dropped session (seconds after the lock connection's last use), over trials."""
    ended = [r["measures"]["keepalive"]["ended_after_last_use_s"] for r in records
             if r["measures"]["keepalive"]["ended_after_last_use_s"] is not None]
    # Recomputed from the figures, never taken from the trial's own flag.
    agreed = sum(k["ended_after_last_use_s"] is not None
                 and ends_as_estimated(k["ended_after_last_use_s"], k["doctor_estimate_s"], k["probe_interval_s"],
                                       k.get("timer_lateness_s", 0.0))
                 for k in (r["measures"]["keepalive"] for r in records))
    return {"n": len(records), "ended": len(ended), "agreed": agreed,
            "median": statistics.median(ended) if ended else None,
            "min": min(ended) if ended else None, "max": max(ended) if ended else None}


def long_duration(seconds: float) -> str:
    """' (2 h 11 min)' after a figure of an hour or more, so the post's "two hours" reads as such."""
    return f" ({int(seconds // 3600)} h {int(seconds % 3600 // 60)} min)" if seconds >= 3600 else ""


def _lateness(keepalive: dict) -> str:
    """' (+ up to 150 s at HZ 250)': the kernel's timer-wheel lateness a trial measured, if it did."""
    late = keepalive.get("timer_lateness_s")
    if late is None:
        return ""
    hz = keepalive.get("kernel_hz")
    return f" (+ up to {late:.3g} s{f' at HZ {hz}' if hz else ', HZ unknown'})"


def _span(low: float, high: float) -> str:
    """'8.17-8.35', or one figure when both round alike."""
    a, b = f"{low:.2f}", f"{high:.2f}"
    return a if a == b else f"{a}-{b}"


def _ended_cell(summary: dict, waited: float) -> str:
    if not summary["ended"]:
        return f"not ended within {waited:g} s ({summary['n']} trials)"
    spread = f"{_span(summary['min'], summary['max'])} s, " if summary["ended"] > 1 else ""
    missing = f", {summary['n'] - summary['ended']} never" if summary["ended"] < summary["n"] else ""
    return f"{summary['median']:.2f} s{long_duration(summary['median'])} ({spread}n={summary['ended']}{missing})"


def _heard(client: dict) -> tuple[str, float | None]:
    """What one holder heard on its dropped connection, and when (seconds from its go)."""
    if client.get("stuck_at"):
        return f"{client['stuck_at']} still waiting after {client['still_waiting_after_s']:g} s", None
    step = client["steps"].get("release") or {}
    result = str(step.get("result") or client.get("ended_before") or "?")
    return ("release raised LockLost" if "LockLost" in result else f"release: {result}"), step.get("after_go_s")


def _learned_cell(records: list[dict]) -> str:
    groups: dict[str, list] = {}
    for r in records:
        key, seconds = _heard(r["measures"]["client"])
        groups.setdefault(key, []).append(seconds)
    parts = []
    for key, heard in groups.items():
        times = [t for t in heard if t is not None]
        when = "" if not times else f" after {_span(min(times), max(times))} s"
        parts.append(f"{key}{when} {len(heard)}/{len(records)}")
    return "; ".join(parts)


@measured_section(170, Measured.KEEPALIVE_DROP)
def section_netdrop(run: RunView, trials: pd.DataFrame) -> str | None:
    frame = run.frame
    rows, endings = [], []
    for (backend, variant), group in trials.groupby(["backend", "variant"], sort=False):
        records = group.to_dict("records")
        first = records[0]["measures"]["keepalive"]
        summary = ending_summary(records)
        endings.append((first, summary))
        verdicts: dict[str, int] = {}
        for r in records:
            verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
        rows.append([backend, VARIANT_LABELS.get(variant, variant), _settings(first),
                     f"{first['doctor_estimate_s']} s{long_duration(first['doctor_estimate_s'])}{_lateness(first)}",
                     _ended_cell(summary, first["waited_s"]),
                     f"{summary['agreed']}/{summary['n']}",
                     ", ".join(f"{v} {n}/{len(records)}" for v, n in verdicts.items()), _learned_cell(records)])
    unheard = sorted({r["backend"] for r in trials.to_dict("records")
                      if r["variant"].startswith("client_") and r["measures"]["client"].get("stuck_at")})
    agreed = sum(s["agreed"] for _, s in endings)
    total = sum(s["n"] for _, s in endings)
    skipped = frame[(frame.measured == Measured.KEEPALIVE_DROP) & (frame.status == "skipped")]
    reasons = sorted(set(skipped.reason.dropna()))
    return "\n".join([
        "## A real network drop", "",
        "The post's *two hours* is computed from keepalive defaults; here it is measured. Each trial runs a "
        "PostgreSQL of its own in a private network namespace; the holder takes its session lock, and its lock "
        "connection's packets are then dropped on the way in (no FIN, no RST, keepalive probes unanswered) "
        "while its write sessions stay up. *server ended it*: seconds from the lock connection's last use "
        "(its grant) until the session left pg_stat_activity, confirmed by the server's log (`could not "
        "receive data from client: Connection timed out`) and by the packets the drop took. *doctor*: what "
        "`lab doctor` computes from the same settings (idle + count x interval); *agrees*: trials within "
        "one probe interval of it, late by no more than the kernel's timer wheel allows (its timers fire up to "
        "one bucket late: the doctor cell's *+ up to*, from the HZ measured in the trial). Then a contender "
        "asks, the holder writes on its other sessions, and releases on the dropped connection: *holder "
        "heard* is how long that took (from the holder's go), "
        "or how long it was still waiting when the lab stopped it. Reproduce: "
        "`lab run --backend all --scenario netdrop` (the OS defaults' two hours: `--profile full`).", "",
        md_table(["backend", "variant", "server keepalives (idle / interval / count)", "doctor",
                  "server ended it", "agrees", "outcome", "holder heard"], rows), "",
        f"The doctor's figure and the measured end agree (within one probe interval, plus the kernel's "
        f"lateness) in {agreed} of {total} "
        "trials." + (f" With the libpq settings in its URL, {', '.join(unheard)} still waited: the settings "
                     "never reached the lock's own connection." if unheard else "")
        + (f" Not run here: {'; '.join(reasons)}." if reasons else ""), ""])
