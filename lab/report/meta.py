"""Report sections about the run itself: every outcome, and what produced it."""

from __future__ import annotations

from collections import Counter

from lab.records import host_cpu
from lab.checkers.outcomes import latest_per_trial, outcome_rows, schema_of
from lab.report.common import md_table
from lab.report.sections import OUTCOMES, RunView, section


INTRO = ("# locklab report\n\n"
         "Which lock keeps two rebuilds apart when things go wrong? Measured on real servers by the run in "
         "*Provenance*, the post's figures beside ours; written by `lab report`, never by hand.")


@section(0)
def section_intro(run: RunView) -> str | None:
    """The title and what the file is."""
    return INTRO


@section(210, file=OUTCOMES)
def section_outcomes(run: RunView) -> str | None:
    trials, meta = run.trials, run.meta
    rows = [[r.scenario, r.backend, r.variant, r.case or "", r.outcome] for r in outcome_rows(trials, meta)]
    return "\n".join(["## Every outcome of this run", "",
                      "One row per scenario, backend and variant; *n/a* rows name what the backend lacks.", "",
                      md_table(["scenario", "backend", "variant", "post case", "outcome"], rows), ""])


def commit_of(meta: dict) -> str:
    """The lab commit a run started on, and whether its tracked files had been changed since.

    A run that did not record it (an older meta.json, or git could not tell) says unknown, never clean."""
    dirty = meta.get("git_dirty")
    state = " with uncommitted changes" if dirty is True else "" if dirty is False else " (uncommitted changes: unknown)"
    return (meta.get("git_commit") or "unknown") + state


RUN_ROW, PROVENANCE = "run", "## Provenance"


def provenance_runs(report: str) -> list[str] | None:
    """The run ids a REPORT.md renders, from the *run* row of its Provenance table (section_provenance writes it,
    ' + ' between merged runs); None when the text has no such row."""
    _, found, rest = report.partition(f"\n{PROVENANCE}\n")
    for line in rest.splitlines() if found else []:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("|") and len(cells) == 2 and cells[0] == RUN_ROW:
            return cells[1].split(" + ")
    return None


@section(220)
def section_provenance(run: RunView) -> str | None:
    meta, run_id = run.meta, run.run_id
    services = meta.get("services", {})
    versions = meta.get("versions", {})
    machine = meta.get("machine", {})
    commit = commit_of(meta)
    against = f" --previous {run.previous_id}" if run.previous_id else ""
    rows = [[RUN_ROW, run_id], ["command", f"`{meta.get('command', '')}`"],
            ["re-render with", f"`lab report {run_id.replace(' + ', ' ')}{against} --output REPORT.md`"],
            ["profile", meta.get("profile", "")],
            ["started (UTC)", meta.get("started", "")], ["lab commit", commit],
            ["machine", f"{machine.get('cores')} cores, {machine.get('memory_gib')} GiB, {machine.get('platform')}"]]
    for merged in meta.get("merged_with", []):
        rows.append(["merged with", merged])
    if run.previous_id:
        rows.append(["previous reference", run.previous_id])
    rows += trial_rows(run.trials, run_id)
    for name, info in sorted(services.items()):
        kind = "embedded" if info.get("embedded") else "external"
        rows.append([f"server: {name}", f"{info.get('version')} ({kind})"])
    settings = meta.get("pg_settings")
    if settings:
        given = ", ".join(f"{name} = {value}" for name, value in settings.get("server_gives", {}).items())
        rows.append(["PostgreSQL gives a session", given or "-"])
        rows.append(["set per database or role", "; ".join(settings.get("set_per_database_or_role") or []) or "none"])
        rows.append(["every lab session pins to 0", ", ".join(settings.get("lab_sessions_pin") or [])
                     + " (except what its scenario sets)"])
    rows += capacity_rows(meta)
    rows += bound_rows(meta)
    rows += [[f"package: {name}", str(version)] for name, version in sorted(versions.items())]
    return "\n".join([PROVENANCE, "", md_table(["what", "value"], rows), ""])


def trial_rows(trials: list[dict], run_id: str) -> list[list[str]]:
    """Per run merged: its trials by status and the schema they were recorded in; then what the report counts
    (a later run's trial replaces an earlier one's with the same id)."""
    rows = []
    names = run_id.split(" + ")
    for name in names:
        mine = [t for t in trials if t.get("run", name) == name]
        if not mine:
            continue
        statuses = Counter(t["status"] for t in mine)
        schemas = sorted({schema_of(t) for t in mine})
        rows.append([f"trials of {name}", f"{len(mine)}: " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
                     + f"; schema {', '.join(map(str, schemas))}"])
    if len(names) > 1:
        counted = Counter(t["status"] for t in latest_per_trial(trials))
        rows.append(["trials counted", f"{sum(counted.values())}: "
                     + ", ".join(f"{n} {s}" for s, n in sorted(counted.items()))])
    return rows


def capacity_rows(meta: dict) -> list[list[str]]:
    """The server's connection limits as the run found them, and each scenario its trials had to fit in
    (planned sessions beside the peak the server really had). Older runs did not record them: no rows."""
    rows = []
    for plan in meta.get("capacity") or []:
        server = plan.get("server", {})
        rows.append(["PostgreSQL connections", f"max_connections {server.get('max_connections')}, "
                     f"{server.get('reserved')} reserved for other roles, {server.get('available')} free for the lab"])
        for name, wave in sorted((plan.get("waves") or {}).items()):
            if wave.get("would_use_sessions", 0) > wave.get("session_budget", 0):
                peak = wave.get("peak_sessions_on_server")
                rows.append([f"fitted: {name}", f"would hold {wave['would_use_sessions']} sessions at once; ran its "
                             f"trials within {wave['session_budget']} (about {wave.get('waves')} waves)"
                             + (f", peak on the server {peak}" if peak is not None else "")])
    return rows


def bound_rows(meta: dict) -> list[list[str]]:
    """Each scenario's wall time beside the least any schedule could take (its lower bound), and the run's, as
    meta.json recorded them; the rule in words. Older runs did not record them: no rows."""
    bounds = meta.get("bounds")
    if not bounds:
        return []
    rows = [["time: lower bound", bounds.get("rule", "")]]
    run = bounds.get("run")
    if run:
        rows.append(["time: the run", f"wall {_over(run['wall_s'], run['bound_s'])}{_stolen(run)}"])
    order = meta.get("scenario_order") or sorted(bounds["scenarios"])
    for name in [n for n in order if n in bounds["scenarios"]]:
        entry = bounds["scenarios"][name]
        # a scenario of shared fault events counts its events (each once in its bound) and their subjects
        units = (f"{entry.get('trials_finished')} trials" if "events" not in entry else
                 f"{entry.get('trials_finished')} events of {entry.get('subjects')} trials")
        rows.append([f"time: {name}", f"wall {_over(entry['wall_s'], entry['bound_s'])}; {entry.get('lane', '')} lane, "
                     f"{units}, up to {entry.get('at_once')} at once{_stolen(entry)}"])
    return rows


def _stolen(entry: dict) -> str:
    """'; 22% of the CPU taken by the host' where the run recorded it (runs before it did not: nothing)."""
    return host_cpu.describe(entry.get("cpu_stolen"))


def _over(wall: float, bound: float) -> str:
    ratio = f"{wall / bound:.2f}x" if bound else "no bound"
    return f"{wall:.0f} s, bound {bound:.0f} s ({ratio})"
