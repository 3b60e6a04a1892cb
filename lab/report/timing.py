"""Report section for the timing runs: the post's statistics lines beside ours, and the chart."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from lab.declarations.capabilities import Capability
from lab.checkers.outcomes import Safety, handover_of
from lab.measures.kinds import Measured
from lab.declarations.post_role import PostRole
from lab.report import published
from lab.report.chart_cache import Drawing
from lab.report.charts import timing_chart
from lab.report.common import md_table
from lab.report.sections import RunView, measured_section

# The post's two timing rows are its methods 1 and 3, named by their connection, whichever backend plays them.
LABELS = {PostRole.METHOD_1: "default", PostRole.METHOD_3: "AUTOCOMMIT"}


def row_label(backend: str, role: PostRole | None, trigger: str) -> str:
    """'cron/default' for the post's rows, 'cron/<backend>' for every other."""
    return f"{trigger}/{backend if role is None else LABELS.get(role, backend)}"


def row_stats(firsts: list[float | None], timeout: float, handovers: list | None = None) -> dict:
    """A timing row's figures; handovers (Safety or None per trial, as lab.checkers.outcomes.handover_of) split overlaps."""
    got = sorted(f for f in firsts if f is not None)
    unit = timeout / 10  # the post's "1 s", scaled with the timeout
    handovers = [h for h in (handovers or []) if h is not None]
    return {"overlapped": len(got), "trials": len(firsts), "min": got[0] if got else None,
            "max": got[-1] if got else None, "within": sum(f <= timeout + unit for f in got),
            "before_timeout": sum(f < timeout for f in got),
            "unsafe": handovers.count(Safety.UNSAFE), "safe": handovers.count(Safety.SAFE),
            "lost": handovers.count(Safety.UNTESTED),
            "unrecorded": len(got) - sum(handovers.count(s) for s in (Safety.UNSAFE, Safety.SAFE, Safety.UNTESTED))}


def stats_line(s: dict, timeout: float) -> str:
    """The post's form: '20/20 trials overlapped; min 10.19s, max 14.98s; 4 within 1s of the timeout'."""
    if not s["overlapped"]:
        return f"0/{s['trials']} trials overlapped"
    unit = timeout / 10
    return (f"{s['overlapped']}/{s['trials']} trials overlapped; min {s['min']:.2f}s, max {s['max']:.2f}s; "
            f"{s['within']} within {unit:g}s of the timeout")


def published_line(key) -> str:
    overlapped, trials, low, high, within = published.TIMING[key]
    if not overlapped:
        return f"{overlapped}/{trials} trials overlapped"
    return f"{overlapped}/{trials} trials overlapped; min {low:.2f}s, max {high:.2f}s; {within} within 1s of the timeout"


TOLERANCE = ("the post's seconds are scaled by our timeout / {post:g} s; min and max agree when within one unit "
             "(timeout / 10 = {unit:g} s, the events' mean gap) of the post's; the count of overlaps, and of "
             "overlaps within one unit of the timeout, when its proportion is within two binomial standard errors "
             "of the post's (exactly, where the post saw all or none)")


def _proportion_agrees(ours: int, n: int, post: int, post_n: int) -> bool:
    if not n or not post_n:
        return n == post_n or not (ours or post)
    p = post / post_n
    return abs(ours / n - p) <= 2 * math.sqrt(p * (1 - p) / n) + 1e-9


@dataclass(frozen=True)
class Compared:
    """One figure of a timing row against the post's: its name, both sides as printed, and whether they agree."""

    key: str  # "overlapped", "min", "max", "within"
    label: str  # as the row words it: "within 1s of the timeout" (the unit scales with the timeout)
    ours: str
    post: str
    agrees: bool

    def text(self) -> str:
        return f"{self.label} {self.ours} vs {self.post}"


def compared_with_post(s: dict, key, timeout: float) -> list[Compared]:
    """Every figure of a row the post also gives, under TOLERANCE; min, max and within only where both
    sides overlapped (one side without overlaps already differs in the count)."""
    overlapped, trials, low, high, within = published.TIMING[key]
    scale, unit = timeout / published.TIMING_TIMEOUT_S, timeout / 10
    out = [Compared("overlapped", "overlapped", f"{s['overlapped']}/{s['trials']}", f"{overlapped}/{trials}",
                    _proportion_agrees(s["overlapped"], s["trials"], overlapped, trials))]
    if overlapped and s["overlapped"]:
        assert low is not None and high is not None and within is not None  # the post gives them where it overlapped
        for name, ours, post in (("min", s["min"], low), ("max", s["max"], high)):
            out.append(Compared(name, name, f"{ours:.2f}s", f"{post * scale:.2f}s",
                                abs(ours - post * scale) <= unit + 1e-9))
        out.append(Compared("within", f"within {unit:g}s of the timeout", f"{s['within']}/{s['overlapped']}",
                            f"{within}/{overlapped}",
                            _proportion_agrees(s["within"], s["overlapped"], within, overlapped)))
    return out


def against_post(s: dict, key, timeout: float) -> list[str]:
    """The figures of a row that differ from the post's beyond the tolerance (empty: it matches)."""
    return [c.text() for c in compared_with_post(s, key, timeout) if not c.agrees]


def handover_text(s: dict, in_transaction: bool) -> str:
    """How the overlaps of a row came about: unsafe, handed over safely, or not recorded."""
    if not s["overlapped"]:
        return "no overlap"
    parts = ["none before the timeout" if not s["before_timeout"] else f"**{s['before_timeout']} before the timeout**"]
    if s["unsafe"]:
        parts.append(f"**{s['unsafe']} unsafe**: another run got in while the holder still believed it held")
    if s.get("lost"):
        parts.append(f"**{s['lost']} lost**: another run got the lock while the holder still believed it held "
                     "(these trials write nothing: whether a write would land is the write columns' finding)")
    if s["safe"]:
        ended = "transaction ended; its work rolled back" if in_transaction else "lease ended; its work refused"
        parts.append(f"{s['safe']} handed over after the holder's {ended}")
    if s["unrecorded"]:
        parts.append(f"handover not recorded for {s['unrecorded']} (the run predates it)")
    return "; ".join(parts)


def chart_kind(s: dict) -> str:
    if s["unsafe"] or s.get("lost"):
        return "unsafe"
    return "safe" if s["overlapped"] and s["safe"] == s["overlapped"] else "unknown"


def errored_trials(frame: pd.DataFrame, backend: str, trigger: str) -> pd.DataFrame:
    return frame[(frame.measured == Measured.GUARD_TIMING) & (frame.status == "error") & (frame.backend == backend)
                 & (frame.variant == trigger)]


def incomplete_text(failed: pd.DataFrame, group: pd.DataFrame) -> str:
    return (f"incomplete: {len(failed)} of {len(failed) + len(group)} trials errored "
            f"({str(failed.reason.iloc[0])[:80]})")


def group_stats(group: pd.DataFrame, timeout: float) -> dict:
    """row_stats of one row's ok trials, the handover of each read from its record."""
    judgements = group.judgement if "judgement" in group else [None] * len(group)
    return row_stats([m["first_got_at"] for m in group.measures], timeout,
                     [handover_of(m, j) for m, j in zip(group.measures, judgements)])


@measured_section(80, Measured.GUARD_TIMING)
def section_timing(run: RunView, ok: pd.DataFrame) -> str | None:
    frame, charts = run.frame, run.charts
    errors = frame[(frame.measured == Measured.GUARD_TIMING) & (frame.status == "error")]  # each row's, below
    timeout = ok.measures.iloc[0]["timeout_s"]
    rows, bars = [], []
    for (backend, trigger), group in ok.groupby(["backend", "variant"], sort=False):
        role = group.post_role.iloc[0]
        label = row_label(backend, role, trigger)
        failed = errored_trials(errors, backend, trigger)
        if not failed.empty:  # the survivors of a partly errored row are not a result
            rows.append([label, incomplete_text(failed, group), "-", "-", "-"])
            continue
        s = group_stats(group, timeout)
        key = (role, trigger)
        post, verdict = "-", "-"
        if key in published.TIMING:
            post = published_line(key)
            differs = against_post(s, key, timeout)
            verdict = "matches the post" if not differs else "**differs from the post**: " + "; ".join(differs)
        rows.append([label, stats_line(s, timeout), post,
                     handover_text(s, Capability.IN_TRANSACTION in group.capabilities.iloc[0]), verdict])
        bars.append((label, s["min"], s["max"], chart_kind(s)))
    charts["timing.png"] = Drawing(timing_chart, (bars, timeout))
    return "\n".join([
        "## Timing runs: when does a second run get in?", "",
        f"A long run holds the lock and does nothing on its connection under a {timeout:g} s timeout "
        f"(idle_in_transaction_session_timeout for the PostgreSQL locks, the TTL for Redis, etcd and the lease "
        f"row); short runs try for it on a {timeout / 2:g} s cron grid or as random events about every "
        f"{timeout / 10:g} s, over {3 * timeout:g} s. All trials ran at once, each on its own key. The post "
        f"used a {published.TIMING_TIMEOUT_S:g} s timeout; at another scale read its seconds times "
        f"{timeout / published.TIMING_TIMEOUT_S:g}. An overlap is *unsafe* when another run got in while the "
        f"holder still believed it held; a *handover* after the holder's transaction or lease ended, its work "
        f"rolled back or refused, is safe. *Against the post*: "
        + TOLERANCE.format(post=published.TIMING_TIMEOUT_S, unit=timeout / 10)
        + ". Reproduce: `lab run --scenario timing`.", "",
        md_table(["row", "ours", "post", "overlaps", "against the post"], rows), "",
        "![first short run to get the lock, per row: red unsafe, green handed over safely, amber handover not "
        "recorded](timing.png)", ""])


LOOKALIKES = {
    "idle_session_in_transaction": ("idle_session_timeout", "It ends only sessions outside a transaction, and a "
                                    "default connection is inside one."),
    "pool_recycle_checked_out": ("SQLAlchemy pool_recycle", "It acts only at checkout, and the lock connection "
                                 "stays checked out."),
    "close_keeps_lock": ("close() on a pooled connection", "The connection goes back to the pool with its session "
                         "and locks alive; invalidate() ends it."),
}


def lookalike_evidence(check: str, m: dict) -> str:
    if check == "idle_session_in_transaction":
        return (f"after {1.7 * m['timeout_s']:g} s under a {m['timeout_s']:g} s idle_session_timeout: state "
                f"'{m['state']}', another session got the lock: {m['other_got_lock']}")
    if check == "pool_recycle_checked_out":
        return (f"past pool_recycle={m['timeout_s']:g} s: lock still held {m['held_while_checked_out']}, same session "
                f"{m['same_session']}; next checkout got a new session: {m['recycled_at_checkout']}")
    return (f"after close(): still held {m['held_after_close']}, another session got it {m['other_got_lock_after_close']}; "
            f"after invalidate(): another session got it {m['other_got_lock_after_invalidate']}")


def lookalike_agreement(ok: pd.DataFrame, check: str) -> tuple[int, int]:
    """(trials that found what the post says, trials) of one lookalike check (ok: the ok lookalikes trials)."""
    group = ok[ok.variant == check]
    return sum(v == "as the post says" for v in group.verdict), len(group)


@measured_section(90, Measured.LOOKALIKE)
def section_lookalikes(run: RunView, ok: pd.DataFrame) -> str | None:
    rows = []
    for check, (name, post) in LOOKALIKES.items():
        group = ok[ok.variant == check]
        if group.empty:
            continue
        agree, _ = lookalike_agreement(ok, check)
        rows.append([name, post, f"{agree}/{len(group)} as the post says; "
                     + lookalike_evidence(check, group.measures.iloc[0])])
    return "\n".join(["## Lookalikes, measured", "",
                      "Three timers from the post's *How to tell it from a lookalike* that can be checked locally. "
                      "(A pooler is measured in its own columns, PgBouncer in session and transaction mode, and a "
                      "dropped network by the network-drop scenario; NAT boxes and load balancers are not run here.) "
                      "Reproduce: `lab run --backend session --scenario lookalikes`.", "",
                      md_table(["lookalike", "post: what rules it out", "measured"], rows), ""])
