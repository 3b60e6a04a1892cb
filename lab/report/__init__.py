"""REPORT.md from a saved run: the post's figures beside ours. Contacts no server.

The output depends only on the run's files (no generation time, fixed ordering
and float formats), so re-rendering the same run gives the same bytes.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from lab.checkers.outcomes import SCHEMAS, latest_per_trial, schema_of
from lab.errors import LabError
from lab.report.chart_cache import pngs_of
from lab.report.meta import commit_of
from lab.report.sections import MAIN, RunView, render_files
from lab.report.session import case_lines
from lab.records.results import RunFolder

__all__ = ["write_report", "render", "render_runs", "render_runs_files", "case_lines"]


def write_report(folders: RunFolder | list[RunFolder], output: Path, html: bool = False,
                 previous: RunFolder | None = None) -> Path:
    """REPORT.md and its charts (PNG, beside it), and with html report.html beside them (lab/report/html.py);
    each file replaced whole or not at all. A chart drawn before from the same data by the same renderer is
    copied from the chart cache (lab/report/chart_cache.py), byte for byte what drawing it writes.

    Several runs merge in the order given: a later run's trial replaces an earlier run's trial
    with the same id, and the provenance is the first run's, naming the others.
    """
    folders = folders if isinstance(folders, list) else [folders]
    with records_left_to_refcounts() as records_read:
        charts: dict = {}
        view = run_view(folders, charts, previous)
        records_read()
        files = render_files(view)
        output.parent.mkdir(parents=True, exist_ok=True)
        pngs = pngs_of(dict(sorted(charts.items())))  # drawn once per what each shows: lab/report/chart_cache.py
        for name, png in pngs.items():  # a name may hold a folder: timelines/...
            target = output.parent / name
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp.png")
            tmp.write_bytes(png)
            os.replace(tmp, target)
        pages = {}
        if html:  # made before any file is replaced: one that fails leaves the report as it was
            from lab.report.html import PAGE, render_html

            def drawn(name: str) -> bytes | None:  # a picture this render drew, as the page inlines it
                return pngs.get(name)

            pages[PAGE] = render_html(files, view, drawn)
    for name, text in [*sorted(files.items(), key=lambda kv: kv[0] == MAIN), *pages.items()]:  # REPORT.md after
        target = output if name == MAIN else output.parent / name  # its appendices: it links them
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, target)  # never a half-written report
    return output


@contextlib.contextmanager
def records_left_to_refcounts() -> Iterator[Callable[[], None]]:
    """A report's records are JSON trees (a reference run's are three million dicts, lists and strings, none in a
    cycle): Python frees them by their reference counts, and its cyclic collector, walking them over and over as the
    render allocates, spends a tenth of the render finding nothing. So they are read with the collector paused; the
    function yielded, called once they are read, freezes them out of its walks (gc.freeze) and resumes it; they are
    given back to it at the end (gc.unfreeze). Left alone when the caller manages the collector itself (paused, or
    objects already frozen)."""
    managed = gc.isenabled() and not gc.get_freeze_count()

    def read() -> None:
        if managed and not gc.isenabled():
            gc.freeze()
            gc.enable()

    if managed:
        gc.disable()
    try:
        yield read
    finally:
        if managed:
            gc.enable()
            gc.unfreeze()


def render_runs(folders: list[RunFolder], charts: dict | None = None, previous: RunFolder | None = None) -> str:
    """REPORT.md's text for one run or several merged (a later run's trial replaces an earlier one's)."""
    return render_runs_files(folders, charts, previous)[MAIN]


def render_runs_files(folders: list[RunFolder], charts: dict | None = None,
                      previous: RunFolder | None = None) -> dict[str, str]:
    """Every file of the report (REPORT.md and its appendices) for one run or several merged."""
    return render_files(run_view(folders, charts, previous))


def run_view(folders: list[RunFolder], charts: dict | None = None, previous: RunFolder | None = None) -> RunView:
    """What the sections read, for one run or several merged (a later run's trial replaces an earlier one's), and
    the previous reference's trials when one is given (its flipped verdicts are shown as unstable)."""
    meta = dict(folders[0].meta())
    if len(folders) > 1:
        meta["merged_with"] = [f"{f.run_id}: `{f.meta().get('command', '')}` at commit {commit_of(f.meta())}"
                               for f in folders[1:]]
        # Each merged run's commit and tree state, for the banner that says this page is no reference.
        meta["merged_provenance"] = [{"git_commit": f.meta().get("git_commit"), "git_dirty": f.meta().get("git_dirty")}
                                     for f in folders]
        # Packages a later run recorded and the first did not (the adapters' libraries) are shown too.
        versions = dict(meta.get("versions", {}))
        for folder in folders[1:]:
            for name, version in folder.meta().get("versions", {}).items():
                if versions.get(name) is None and version is not None:
                    versions[name] = version
        meta["versions"] = versions
        meta.update(_merged_order([f.meta() for f in folders]))
    trials = []
    for folder in folders:  # each run's records read once
        records = folder.trials()
        refuse_unknown_schema(folder, records)
        for record in records:
            record["run"] = folder.run_id  # a replay needs the trial's own run
        trials += records
    # Of the previous reference, what its cells' marks are judged on, kept as each record is read.
    before = latest_per_trial([judged_fields(r) for r in previous.records()]) if previous is not None else []
    return RunView.of(trials, meta, " + ".join(f.run_id for f in folders), charts, before,
                      previous.run_id if previous is not None else "")


def judged_fields(record: dict) -> dict:
    """A previous reference's record as the matrix judges its cell again (lab/decision/cells.py judge_in_column: the
    status, verdict, safety, judgement, exercised, skip and reason, and of the measures how many schedules struck):
    without its history, its shared event, the rest of its measures, and a judgement's findings where its answers
    are recorded: most of its weight. tests/fast/test_report_reading.py holds
    the previous reference's cells judged from these to the same marks as from whole records."""
    kept = {key: value for key, value in record.items() if key not in ("history", "event")}
    measures = record.get("measures")
    if isinstance(measures, dict):
        kept["measures"] = {"struck": measures["struck"]} if "struck" in measures else {}
    judgement = record.get("judgement")
    if isinstance(judgement, dict) and isinstance(judgement.get("answers"), dict):
        # Its answers recorded, a judgement is read from them (lab/checkers/verdict.py answers_of): the findings
        # they were made from, and the figures the words quote, are most of its weight.
        kept["judgement"] = {k: v for k, v in judgement.items() if k not in ("findings", "figures")}
    return kept


def refuse_unknown_schema(folder: RunFolder, records: list[dict]) -> None:
    """One line, before anything is written, for a run whose trials (records, as read) declare a schema this lab
    cannot read."""
    found = sorted({schema_of(t) for t in records} - set(SCHEMAS))
    if found:
        raise LabError(f"run {folder.run_id} holds trials of schema {found[0]}, which this lab cannot render (it reads "
                       f"schemas {', '.join(map(str, SCHEMAS))}): render it with the lab of its commit "
                       f"({commit_of(folder.meta())}), or upgrade this checkout")


def _merged_order(metas: list[dict]) -> dict:
    """The order keys of several runs' meta.json merged, first run first; a key one run lacks is dropped
    (the registries order that run), except the declarations, which merge per backend or scenario."""
    merged: dict = {}
    for key in ("backend_order", "scenario_order"):
        if all(m.get(key) for m in metas):
            merged[key] = list(dict.fromkeys(name for m in metas for name in m[key]))
    if all(m.get("variants") for m in metas):
        variants: dict = {}
        for m in metas:
            for scenario, names in m["variants"].items():
                variants[scenario] = list(dict.fromkeys([*variants.get(scenario, []), *names]))
        merged["variants"] = variants
    for key in ("capabilities", "lock_service", "where", "summaries", "faults", "libraries", "languages", "library_versions",
                "post_roles"):
        declared: dict = {}
        for m in metas:
            declared.update(m.get(key) or {})  # a later run's declaration wins, as its trials do
        if declared:
            merged[key] = declared
    return merged


def render(meta: dict, trials: list[dict], run_id: str, charts: dict | None = None) -> str:
    """The report's text: every registered section (lab/report/sections.py) in its declared order; charts,
    when given, collects name -> draw(path) for the PNGs it links."""
    return render_files(RunView.of(trials, meta, run_id, charts))[MAIN]
