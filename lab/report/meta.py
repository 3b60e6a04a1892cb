"""Report sections about the run itself: every outcome, and what produced it."""

from __future__ import annotations

from lab.harness.outcomes import outcome_rows
from lab.report.common import md_table


def section_outcomes(trials: list[dict], meta: dict | None = None) -> str:
    rows = [[r.scenario, r.backend, r.variant, r.case or "", r.outcome] for r in outcome_rows(trials, meta)]
    return "\n".join(["## Every outcome of this run", "",
                      "One row per scenario, backend and variant; *n/a* rows name what the backend lacks.", "",
                      md_table(["scenario", "backend", "variant", "post case", "outcome"], rows), ""])


def commit_of(meta: dict) -> str:
    """The lab commit a run started on, and whether its tracked files had been changed since.

    A run that did not record it (an older meta.json, or git could not tell) says unknown, never clean."""
    dirty = meta.get("git_dirty")
    state = {True: " with uncommitted changes", False: ""}.get(dirty, " (uncommitted changes: unknown)")
    return (meta.get("git_commit") or "unknown") + state


def section_provenance(meta: dict, run_id: str) -> str:
    services = meta.get("services", {})
    versions = meta.get("versions", {})
    machine = meta.get("machine", {})
    commit = commit_of(meta)
    rows = [["run", run_id], ["command", f"`{meta.get('command', '')}`"],
            ["re-render with", f"`lab report {run_id.replace(' + ', ' ')} --output REPORT.md`"],
            ["profile", meta.get("profile", "")],
            ["started (UTC)", meta.get("started", "")], ["lab commit", commit],
            ["machine", f"{machine.get('cores')} cores, {machine.get('memory_gib')} GiB, {machine.get('platform')}"]]
    for merged in meta.get("merged_with", []):
        rows.append(["merged with", merged])
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
    rows += [[f"package: {name}", str(version)] for name, version in sorted(versions.items())]
    return "\n".join(["## Provenance", "", md_table(["what", "value"], rows), ""])


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
