"""Report section for the kill-point search: each backend's smallest failing schedule, or how many passed."""

from __future__ import annotations

import pandas as pd

from lab.measures.kinds import Measured
from lab.report.common import md_table
from lab.report.sections import RunView, measured_section
from lab.report.timelines import slug


def passed(m: dict) -> str:
    """A search that found nothing: how many schedules ran, and (where recorded) how many of them struck."""
    struck = m.get("struck")
    if struck is None:  # a run that predates the count
        return f"{m['tried']} schedules tried, none failed"
    if not struck:
        return f"○ not exercised: none of {m['tried']} schedules struck its target"
    return f"{struck} of {m['tried']} schedules struck, none failed"


@measured_section(180, Measured.KILL_POINT_SEARCH)
def section_killpoints(run: RunView, ok: pd.DataFrame) -> str | None:
    run_id = run.run_id
    rows = []
    for _, trial in ok.iterrows():
        m = trial.measures
        if m["minimal"] is None:
            rows.append([trial.backend, passed(m), "-", f"{m['seconds']:.0f} s"])
            continue
        kinds = ", ".join(sorted({v["kind"] for v in m["minimal"]["violations"]}))
        detail = m["minimal"]["violations"][0]["detail"]
        picture = slug(trial.scenario, trial.backend, trial.variant)
        rows.append([trial.backend, f"**{kinds}** ({detail}), after {m['tried']} schedules: {m['described']}",
                     f"`lab replay {trial.run if isinstance(trial.run, str) else run_id} {trial.backend}`; "
                     f"[timeline]({picture})", f"{m['seconds']:.0f} s"])
    return "\n".join([
        "## Kill points searched by hypothesis", "",
        "Hypothesis draws a fault schedule (kill point x fault x duration x runs x companies), runs it for real, "
        "and a checker reads the history: a write committed after another run was granted the company "
        "(*stale write accepted*), two runs' writes of one company overlapping, a release that reported success "
        "for a lost lock, a torn or mixed company. A failing schedule is shrunk to the smallest one that still "
        "fails (within a time budget) and can be replayed. A schedule *struck* when its fault found its target; "
        "one that did not proves nothing. Reproduce: `lab run --scenario killpoints`.", "",
        md_table(["backend", "smallest failing schedule (or the budget that passed)", "replay", "search time"], rows),
        ""])
