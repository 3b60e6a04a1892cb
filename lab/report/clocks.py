"""Clocks: Kleppmann's case on real Redlock masters, which clock each holder keeps its lease by, and the safety
margin of every lease against a server clock that jumps or runs fast.

Read from the run's files alone: the server_clock, holder_clock and margin trials, their typed verdicts and
histories. A margin is computed again here from the steps each search recorded (lab/measures/margin.py's
`bounds`, over each step's verdict as the checkers gave it and what its history shows the lease did), never taken
from the summary the scenario wrote; the range each search covered is read from the plan it recorded.
"""

from __future__ import annotations

import statistics

import pandas as pd

from lab.checkers import ops
from lab.checkers.outcomes import does_not_run, judgement_of
from lab.checkers.verdict import Kind, Valid, Verdict
from lab.checkers.words import LAPSED, WORDS
from lab.measures.kinds import Measured
from lab.measures.margin import BREAKS_NEEDED, Confidence, Margin, Outcome, Step, bounds, outcome_of
from lab.report.common import FLAG, md_table, measuring, ordered_backends
from lab.report.sections import RunView, measured_section, section
from lab.report.timelines import history_picture, slug

KLEPPMANN, CONTROL = "kleppmann", "kleppmann_control"


def _verdict(record: dict) -> Verdict | None:
    judgement = judgement_of(record)
    return None if judgement is None else Verdict.from_json(judgement)


def _counts(records: list[dict]) -> str:
    """'stale write accepted 3/3', several kinds by count, or the reason nothing ran."""
    done = [r for r in records if r["status"] == "ok"]
    if not done:
        if any(r["status"] == "error" for r in records):
            return f"error {sum(r['status'] == 'error' for r in records)}/{len(records)}"
        reasons = sorted({str(r.get("reason") or "") for r in records})
        return ("n/a: " if not any(does_not_run(r) for r in records) else "") + "; ".join(reasons) if reasons else "not run"
    kinds = pd.Series([r["verdict"] for r in done]).value_counts()
    return ", ".join(f"{kind} {n}/{len(done)}" for kind, n in kinds.items())


# --- Kleppmann's case ----------------------------------------------------------------------------------------

@section(162)
def section_kleppmann(run: RunView) -> str | None:
    frame = run.frame
    trials = frame[(frame.measured == Measured.SERVER_CLOCK) & frame.variant.isin([KLEPPMANN, CONTROL])]
    if trials.empty:
        return None
    lines = ["## Kleppmann's clock case on real Redlock masters", "",
             "Martin Kleppmann's argument against Redlock, run on five real Redis masters of each trial's own: the "
             "holder's grant stands on exactly three (two masters refused it while it asked, an ACL denying SET, "
             "as if unreachable, and accept writes again once it holds), then the clock of one of those three jumps "
             "two TTLs ahead (libfaketime in that server alone), so the "
             "key expires there; a contender asks all five at once, while the holder's lease still runs on every "
             "other clock; then the holder writes. The control is the same trial with no jump. Verdicts are the "
             "checkers' over each trial's history.", ""]
    rows = []
    for backend in ordered_backends(trials):
        mine = trials[trials.backend == backend]
        if (mine.status == "skipped").all() and not any(does_not_run(r) for r in mine.to_dict("records")):
            continue  # not a lock on Redlock masters: the matrix says n/a, and why
        rows.append([backend, _counts(mine[mine.variant == KLEPPMANN].to_dict("records")),
                     _counts(mine[mine.variant == CONTROL].to_dict("records"))])
    if not rows:
        return None
    lines += [md_table(["backend", "one granting master's clock jumped", "no jump (control)"], rows), ""]
    shown = _first_lost(trials[trials.variant == KLEPPMANN].to_dict("records"))
    if shown is not None:
        lines += _case(shown, run)
    return "\n".join(lines)


def _first_lost(records: list[dict]) -> dict | None:
    """The first trial where the checkers found the lock held by two at once."""
    for record in records:
        verdict = _verdict(record)
        if record["status"] == "ok" and verdict is not None and verdict.lock is Valid.FALSE:
            return record
    return None


def _case(record: dict, run: RunView) -> list[str]:
    """One trial of the case: what its evidence and its history say, and its timeline."""
    m, verdict = record["measures"], _verdict(record)
    assert verdict is not None  # _first_lost chose a judged trial
    evidence = m.get("evidence") or {}
    history = ops.from_json(record["history"])
    grants = [op for op in history if op.f is ops.F.ACQUIRE and op.type is ops.Type.OK and op.get("scope") == "run"]
    struck, granted, after = evidence.get("struck_master"), evidence.get("granted_by"), evidence.get("granted_by_after")
    masters = evidence.get("masters", 0)
    contender_masters = sorted(set(range(masters)) - set(after or [])) if after is not None else []
    lines = [f"Trial `{record['id']}`: the holder was granted at {grants[0].time:.3f} s on masters {granted} "
             f"(of {masters}); master {struck}'s clock read {evidence.get('offset_after_s', 0):+.3f} s off the real "
             f"one after the jump, and the holder's key then stood on masters {after} only. The contender was "
             f"granted at {grants[1].time:.3f} s: a majority of {masters} that can only be masters "
             f"{contender_masters}, while the holder still believed it held (until {_belief_end(history):.3f} s). "
             f"The checkers: **{record['verdict']}** ({'; '.join(f.detail for f in verdict.findings if f.kind is not None and f.valid is Valid.FALSE)})."
             if len(grants) >= 2 else f"Trial `{record['id']}`: {record['verdict']}.", "",
             "Its history (the trial's clock, seconds; the fault's clock readings are the struck master's offset from "
             "the real clock):", "",
             md_table(["time", "process", "type", "f", "value"],
                      [[f"{op.time:.3f}", op.process, op.type.value, op.f.value, _value(op)] for op in history]), ""]
    draw = history_picture(record)
    if draw is not None:
        name = slug(record["scenario"], record["backend"], record["variant"])
        run.charts[name] = draw
        lines += [f"![{record['id']}]({name})", ""]
    return lines


def _belief_end(history: list[ops.Op]) -> float:
    """When the holder stopped believing it held: it asked to release, or heard it was gone."""
    ends = [op.time for op in history if op.process == "holder" and (
        (op.f is ops.F.RELEASE and op.type is ops.Type.INVOKE) or op.f is ops.F.TOLD) and op.time > 0]
    granted = [op.time for op in history if op.process == "holder" and op.f is ops.F.ACQUIRE and op.type is ops.Type.OK]
    later = [t for t in ends if granted and t > granted[0]]
    return min(later) if later else history[-1].time


def _value(op: ops.Op) -> str:
    text = ", ".join(f"{k}={v}" for k, v in op.value.items() if k not in ("text",))
    if op.get("text"):
        text += (", " if text else "") + f"text={str(op.get('text'))[:60]}"
    return text


# --- which clock a holder keeps its lease by ------------------------------------------------------------------

HOLDER_VARIANTS = (("control", "no jump (control)"), ("wall_back", "wall clock 10 TTLs back"),
                   ("all_back", "wall and monotonic clocks back"))


def _lost(records: list[dict]) -> tuple[int, int]:
    """(trials where the holder's lease did not last: the checkers found someone else got in, any kind but *held*;
    trials judged). A holder told its lease was gone has lost it too, though its belief ended in time."""
    verdicts = [v for r in records if r["status"] == "ok" and (v := _verdict(r)) is not None
                and v.kind is not Kind.NOT_ACQUIRED]
    return sum(v.kind is not Kind.HELD for v in verdicts), len(verdicts)


def holder_finding(control: tuple[int, int], wall_back: tuple[int, int]) -> str:
    """What the control and the wall-clock jump say together, only when every trial of each agrees: each pair is
    (trials in which another run got in, trials judged)."""
    (lost_c, n_c), (lost_w, n_w) = control, wall_back
    if not n_c or not n_w:
        return "not measured"
    if lost_c == n_c:
        return ("its lease lapsed in the control too (it renews nothing, or not in time here), so its holder's clock "
                "decides nothing")
    if lost_c:
        return f"inconclusive: the control itself lost {lost_c} of {n_c}"
    if lost_w == n_w:
        return "renews by the wall clock: kept its lease in the control, lost it every time its wall clock stepped back"
    if not lost_w:
        return ("kept its lease with its wall clock stepped back: its renewals are timed by the monotonic clock "
                "(or by nothing the wall clock moves)")
    return f"mixed: lost {lost_w} of {n_w} with its wall clock stepped back, none in the control"


@measured_section(164, Measured.HOLDER_CLOCK, select=measuring)
def section_holder_clock(run: RunView, trials: pd.DataFrame) -> str | None:
    not_leases = [b for b in ordered_backends(trials) if (trials[trials.backend == b].status == "skipped").all()
                  and not any(does_not_run(r) for r in trials[trials.backend == b].to_dict("records"))]
    leases = trials[~trials.backend.isin(not_leases)]
    # A variant that ran for no lease, for one reason, is said once under the table instead of in every row.
    absent: dict[str, tuple[str, bool]] = {}  # variant -> its one reason, and whether it says *does not run*
    for v, _ in HOLDER_VARIANTS:
        records = leases[leases.variant == v].to_dict("records")
        reasons = {str(r.get("reason") or "") for r in records}
        if len(reasons) == 1 and all(r["status"] == "skipped" for r in records):
            absent[v] = (reasons.pop(), any(does_not_run(r) for r in records))
    shown = [(v, label) for v, label in HOLDER_VARIANTS if v not in absent]
    rows = []
    for backend in ordered_backends(leases):
        mine = leases[leases.backend == backend]
        cells = [_counts(mine[mine.variant == v].to_dict("records")) for v, _ in shown]
        finding = holder_finding(_lost(mine[mine.variant == "control"].to_dict("records")),
                                 _lost(mine[mine.variant == "wall_back"].to_dict("records")))
        rows.append([backend, *cells, finding])
    notes = [f"*{label}*: {'does not run here' if absent[v][1] else 'n/a'}: "
             f"{absent[v][0].removeprefix('does not run: ')}" for v, label in HOLDER_VARIANTS if v in absent]
    if not_leases:
        notes.append(f"n/a for {', '.join(not_leases)}: no lease the holder keeps alive.")
    return "\n".join([
        "## Which clock each holder keeps its lease by", "",
        "The holder process runs with libfaketime preloaded (its own clocks only); once it holds, its wall clock "
        "steps back ten TTLs (an NTP step, a restored VM) while it keeps running, and a contender tries for one "
        "TTL. A lock whose renewals or validity follow the wall clock lets its lease lapse then; one on the "
        "monotonic clock keeps it. The control is the same preloaded holder with no jump. The finding is computed "
        "from the checkers' verdicts only when every trial of a column agrees (the lease lasted: *held*, nobody "
        "else got in; or it did not: any other kind); otherwise it says mixed or inconclusive.", "",
        md_table(["backend", *[label for _, label in shown], "finding"], rows), "",
        *[f"- {note}" for note in notes], ""])


# --- safety margins ---------------------------------------------------------------------------------------

def _outcome(step: dict) -> Outcome:
    """One recorded step as the checkers judged it and as its history shows its lease (never its stored outcome)."""
    return outcome_of(Verdict.from_json(step["judgement"]), ops.from_json(step["history"]))


def steps_of(record: dict) -> list[Step]:
    """A margin search's steps as the checkers judged them and their histories show, from its record."""
    return [Step(float(s["strength"]), _outcome(s)) for s in record["measures"]["steps"]]


def _trials(n: int) -> str:
    return "1 trial" if n == 1 else f"{n} trials"


def margin_cell(margin: Margin, kinds: dict[float, str]) -> tuple[str, str, str]:
    """(largest survived, smallest broken, note) as the table shows them, each bound with its trials; a breaking
    point on fewer broken trials than it needs says how many of them broke ('1 of 2')."""
    survived = "none" if margin.survived is None else f"{margin.survived:g} ({_trials(margin.survived_trials)})"
    short = f"; {margin.breaks} of {BREAKS_NEEDED}" if margin.confidence is Confidence.SHORT else ""
    broke = ("not in the range" if margin.broke is None
             else f"{margin.broke:g} ({_trials(margin.broke_trials)}: {kinds.get(margin.broke, '?')}{short})")
    notes = []
    if margin.lapsed:
        notes.append(f"{LAPSED} at {', '.join(f'{s:g}' for s in margin.lapsed)}")
    if margin.contradictions:
        notes.append(f"{FLAG} not monotone: survived at {', '.join(f'{s:g}' for s in margin.contradictions)} above "
                     f"the smallest broken strength, so no clean margin")
    if margin.unknown:
        notes.append(f"unknown at {', '.join(f'{s:g}' for s in margin.unknown)} (search stopped)")
    return survived, broke, "; ".join(notes)


def asked_after_grant(history: list[ops.Op]) -> float | None:
    """Seconds from the holder's grant to the contender's first request: a jump breaks the lease when it exceeds
    what is left of it then, so this is what a jump's margin is measured against (a fault that takes longer to
    strike or confirm leaves less)."""
    granted = next((op.time for op in history if op.process == "holder" and op.f is ops.F.ACQUIRE
                    and op.type is ops.Type.OK), None)
    asked = next((op.time for op in history if op.process == "contender" and op.f is ops.F.ACQUIRE
                  and op.type is ops.Type.INVOKE), None)
    return None if granted is None or asked is None else asked - granted


def _kinds_at(record: dict) -> dict[float, str]:
    """Strength -> what the checkers found there (the worst kind among its trials, in the report's words)."""
    found: dict[float, list[tuple[Verdict, Outcome]]] = {}
    for step in record["measures"]["steps"]:
        found.setdefault(round(float(step["strength"]), 4), []).append((Verdict.from_json(step["judgement"]),
                                                                         _outcome(step)))
    return {s: ", ".join(sorted({WORDS.get(v.kind, v.kind.value) for v, outcome in vs if outcome is Outcome.BROKE}))
            or "survived" for s, vs in found.items()}


@measured_section(166, Measured.MARGIN_SEARCH, select=measuring)
def section_margins(run: RunView, trials: pd.DataFrame) -> str | None:
    variants = list(dict.fromkeys(trials.variant[trials.variant != "-"]))
    # A backend the scenario does not apply to at all (no lease) is named once under the table, with its reason.
    whole = {b: r["reason"] for b in ordered_backends(trials)
             if len(records := trials[trials.backend == b].to_dict("records")) and all(
                 x["status"] == "skipped" and x["variant"] == "-" and not does_not_run(x) for x in records)
             for r in records[:1]}
    units: dict[str, str] = {}
    plans: dict[str, list[dict]] = {}  # variant -> each search's plan, as its record keeps it
    margins: list[Margin] = []
    lapsed = 0  # trials whose lease was lost with nobody taking it
    rows = []
    for backend in ordered_backends(trials[~trials.backend.isin(list(whole))]):
        mine = trials[trials.backend == backend]
        for variant in variants or ["-"]:
            records = mine[mine.variant.isin([variant, "-"])].to_dict("records")
            done = [r for r in records if r["status"] == "ok"]
            if not done:
                rows.append([backend, variant, "-", "-", "-", "-", _counts(records)])
                continue
            for record in done:
                units[variant] = record["measures"].get("unit", "")
                if record["measures"].get("plan"):
                    plans.setdefault(variant, []).append(record["measures"]["plan"])
                steps = steps_of(record)
                margin = bounds(steps)
                margins.append(margin)
                lapsed += sum(step.outcome is Outcome.LAPSED for step in steps)
                survived, broke, note = margin_cell(margin, _kinds_at(record))
                asked = [t for step in record["measures"]["steps"]
                         if (t := asked_after_grant(ops.from_json(step["history"]))) is not None]
                rows.append([backend, variant, survived, broke, str(margin.trials),
                             f"{statistics.median(asked):.2f}" if asked else "-", note])
    ttl = sorted({r["measures"].get("ttl_s") for r in trials.to_dict("records") if r["status"] == "ok"})
    return "\n".join([
        "## The safety margin of each lease against a clock that moves or a slow network", "",
        "How far the clock that keeps a lease may move, or how much later its renewals may arrive, before the lease "
        "breaks, as a share of its TTL: for each "
        "lease backend and fault, a bisection of real trials (each judged by the checkers; *broke* means another "
        "run held the lock while the holder still believed it held, or the company was left unsafe; *survived* "
        "means nobody else got in and the holder's lease demonstrably held: its renewal or its release succeeded, "
        "or its server said it held), the largest "
        "strength that survived every trial at it and the smallest that broke one, each with the trials behind it "
        "(a bound from one trial says so). A breaking point rests on "
        f"{BREAKS_NEEDED} broken trials at its strength; where fewer broke, its cell says how many of the "
        f"{BREAKS_NEEDED} did (*1 of {BREAKS_NEEDED}*). A trial whose lease was visibly gone (a renewal failed, "
        f"the release raised) while nobody else got in is *{LAPSED}*: neither survived nor broke, its strength named "
        "in the note. The true threshold lies between the two bounds. A jump breaks a lease when "
        "it exceeds what is left of it as the contender asks, so the table gives how long after the holder's grant "
        "the contender first asked (the median over the search's trials: a fault that takes longer to strike and "
        "confirm, such as Redlock's five masters, leaves less). A fenced lock breaks "
        "here like any other (its lease is what is measured); what its fence then did is in the *broke* cell."
        + (f" TTL {', '.join(f'{t:g} s' for t in ttl)}." if ttl else "")
        + _search_limits([plan for found in plans.values() for plan in found]), "",
        *[f"- `{variant}`: strength in {unit}{_ranges(plans.get(variant, []))}." for variant, unit in units.items()],
        "", md_table(["backend", "fault", "largest survived (TTLs)", "smallest broke (TTLs)", "trials",
                      "contender asked after grant (s, median)", "note"], rows),
        "", *_margin_counts(margins, lapsed),
        *([f"n/a ({reason}): {', '.join(names)}." for reason, names in _by_reason(whole).items()] + [""]
          if whole else [])])


def _ranges(plans: list[dict]) -> str:
    """'; range searched 0 to 4': the range each search of a fault recorded in its plan (several when they differ)."""
    ranges = list(dict.fromkeys((float(p["low"]), float(p["high"])) for p in plans))
    return f"; range searched {', '.join(f'{low:g} to {high:g}' for low, high in ranges)}" if ranges else ""


def _search_limits(plans: list[dict]) -> str:
    """' Each search: at most 12 trials, ...': the budget, resolution and confirmations the searches recorded."""
    limits = list(dict.fromkeys((p["budget"], p["resolution"], p["confirm"]) for p in plans))
    if not limits:
        return ""
    return " Each search: " + "; or ".join(
        f"at most {budget} trials, stopping when the bounds are {resolution:g} apart, and up to {_trials(confirm)} "
        f"at each bound" for budget, resolution, confirm in limits) + "."


def _margin_counts(margins: list[Margin], lapsed: int) -> list[str]:
    """The lines under the table: how many breaking points rest on fewer broken trials than they need, and how many
    trials lost their lease with nobody taking it."""
    broken = [m for m in margins if m.confidence is not None]
    short = sum(m.confidence is Confidence.SHORT for m in broken)
    lines = []
    if broken:
        lines.append(f"{short} of {len(broken)} breaking points rest on fewer broken trials than the {BREAKS_NEEDED} "
                     "a breaking point needs.")
    if lapsed:
        lines.append(f"{_trials(lapsed)} lost {'its lease' if lapsed == 1 else 'their lease'} with nobody else "
                     f"taking it (*{LAPSED}*): counted neither survived nor broke.")
    return [" ".join(lines), ""] if lines else []


def _by_reason(reasons: dict[str, str]) -> dict[str, list[str]]:
    """backend -> reason, as reason -> backends (in the order given)."""
    grouped: dict[str, list[str]] = {}
    for backend, reason in reasons.items():
        grouped.setdefault(reason, []).append(backend)
    return grouped
