"""A scan's results as a reader sees them: text for a terminal, JSON for scripts, SARIF 2.1.0 for code-scanning
tools. Every word here comes from the typed results; nothing is parsed back out of text.

Paths are shown relative to the current folder where they lie under it (an installed library's file keeps its full
path). SARIF carries the findings (level error) and the unknowns (level note); a fine lock is not a result there.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from lab.scan.findings import Bug, Result, ScanReport, Site, Status

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
HELP = "docs/scan.md in the locklab checkout says what each rule means and how the scanner decides it."
UNKNOWN_RULE = "unknown_mode"
TITLES = {
    Bug.LEFT_OPEN: "session lock left idle in the transaction its statement opened",
    Bug.REOPENED: "session lock whose connection runs another statement after the commit and leaves it open",
    Bug.RELEASE_FALSE_IGNORED: "release whose false answer is never read",
    Bug.RELEASE_ERROR_SWALLOWED: "release whose failure is swallowed",
}


def _where(site: Site, root: Path) -> str:
    return site.shown(root)


def _title(result: Result) -> str:
    if result.bug is not None:
        case = {Bug.LEFT_OPEN: " (case A)", Bug.REOPENED: " (case D)"}.get(result.bug, "")
        return f"bug {result.bug.number}{case}: {TITLES[result.bug]}"
    return {Status.FINE: "fine", Status.UNKNOWN: "unknown", Status.NOT_JUDGED: "not judged"}[result.status]


def _connection_line(result: Result, root: Path) -> str | None:
    conn = result.connection
    if conn is None:
        return None
    made = f", made at {_where(conn.made_at, root)}" if conn.made_at is not None else ""
    return f"{conn.driver.__doc__}{made}; transaction mode: {conn.mode.value} ({conn.why})"


def _evidence_line(result: Result) -> str | None:
    if not result.evidence:
        return None
    e = result.evidence[0]
    return (f"the lab's `{e.backend}` ({e.why_this_backend}) under *{e.column}*: {e.text} "
            f"(reference run {e.run})")


def text(report: ScanReport, root: Path | None = None) -> str:
    root = root or Path.cwd()
    lines: list[str] = []
    for result in report.results:
        if result.status in (Status.FINDING, Status.UNKNOWN):
            lines += _long(result, root)
    looked = [r for r in report.results if r.status in (Status.FINE, Status.NOT_JUDGED)]
    if looked:
        lines += ["", "Looked at, and fine (or another server's lock):"]
        for result in looked:
            evidence = f" [{result.evidence[0].backend}: {result.evidence[0].text}]" if result.evidence else ""
            line = f"  {_where(result.site, root)}  {result.call}: {result.why}{evidence}"
            if line not in lines:  # the same lock reached through several classes, on other assumptions
                lines.append(line)
    for warning in report.warnings:
        where = f"{_where(warning.site, root)}: " if warning.site is not None else ""
        lines.append(f"warning: {where}{warning.message}")
    lines += ["", summary(report)]
    return "\n".join(lines).lstrip("\n") + "\n"


def _long(result: Result, root: Path) -> list[str]:
    head = f"{_where(result.site, root)}  {result.status.value.upper()}  {_title(result)}"
    rows = [("lock", result.call + (f", via {' -> '.join(_where(s, root) for s in result.via)}" if result.via
                                    else "")),
            ("in", result.library and f"the installed library {result.library}"),
            ("reached from", ", ".join(result.owners)),
            ("connection", _connection_line(result, root)),
            ("why", result.why),
            ("assumed", "; ".join(result.assumed)),
            ("fix", result.fix),
            ("evidence", _evidence_line(result))]
    return ["", head] + [f"    {name:<12} {value}" for name, value in rows if value]


def summary(report: ScanReport) -> str:
    counts = {status: sum(r.status is status for r in report.results) for status in Status}
    bugs = sorted({r.bug.number for r in report.findings if r.bug is not None})
    found = f"{counts[Status.FINDING]} finding{'s' if counts[Status.FINDING] != 1 else ''}"
    if bugs:
        found += f" (bug {' and '.join(str(b) for b in bugs)})"
    reference = f"; evidence from reference run {report.reference}" if report.reference else (
        "; no reference evidence")
    unreached = (f" ({report.unreached} {'reaches' if report.unreached == 1 else 'reach'} no PostgreSQL client)"
                 if report.unreached else "")
    return (f"lab scan: {found}, {counts[Status.UNKNOWN]} unknown, {counts[Status.FINE]} fine, "
            f"{counts[Status.NOT_JUDGED]} not judged, in {report.files} file{'s' if report.files != 1 else ''}"
            f"{unreached}{reference}")


def as_json(report: ScanReport) -> str:
    payload = {"reference": report.reference, "files": report.files, "unreached": report.unreached,
               "summary": summary(report),
               "results": [asdict(r) for r in report.results],
               "warnings": [asdict(w) for w in report.warnings]}
    return json.dumps(payload, indent=2, ensure_ascii=False)


def _location(site: Site, root: Path) -> dict:
    path = Path(site.path)
    try:
        uri = path.resolve().relative_to(root.resolve()).as_posix()
        artifact = {"uri": uri, "uriBaseId": "%SRCROOT%"}
    except ValueError:
        artifact = {"uri": path.resolve().as_uri()}
    return {"physicalLocation": {"artifactLocation": artifact,
                                 "region": {"startLine": max(site.line, 1), "startColumn": site.col + 1}}}


def sarif(report: ScanReport, root: Path | None = None) -> str:
    root = root or Path.cwd()
    rules = [{"id": bug.value, "name": bug.name.title().replace("_", ""),
              "shortDescription": {"text": TITLES[bug]}, "fullDescription": {"text": bug.__doc__ or ""},
              "help": {"text": HELP}, "defaultConfiguration": {"level": "error"}} for bug in Bug]
    rules.append({"id": UNKNOWN_RULE, "name": "UnknownTransactionMode",
                  "shortDescription": {"text": "session lock on a connection whose transaction mode the code does not "
                                               "show"},
                  "fullDescription": {"text": Status.UNKNOWN.__doc__ or ""}, "help": {"text": HELP},
                  "defaultConfiguration": {"level": "note"}})
    ids = [rule["id"] for rule in rules]
    results = []
    for result in report.results:
        if result.status not in (Status.FINDING, Status.UNKNOWN):
            continue
        rule = result.bug.value if result.bug is not None else UNKNOWN_RULE
        message = f"{_title(result)}: {result.why}"
        if result.assumed:
            message += f" (assumed: {'; '.join(result.assumed)})"
        if result.fix:
            message += f" Fix: {result.fix}."
        evidence = _evidence_line(result)
        if evidence:
            message += f" Evidence: {evidence}."
        entry: dict = {"ruleId": rule, "ruleIndex": ids.index(rule),
                       "level": "error" if result.status is Status.FINDING else "note",
                       "message": {"text": message}, "locations": [_location(result.site, root)]}
        related = [*result.via, *([result.related] if result.related else [])]
        if related:
            entry["relatedLocations"] = [{"id": i, **_location(site, root)} for i, site in enumerate(related)]
        results.append(entry)
    run = {"tool": {"driver": {"name": "lab scan", "rules": rules}},
           "originalUriBaseIds": {"%SRCROOT%": {"uri": root.resolve().as_uri() + "/"}},
           "results": results}
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2, ensure_ascii=False)
