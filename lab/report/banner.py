"""The report's first lines: which run this is, by what command, at which commit, and whether it can be called the
reference.

Only one run, made at one commit whose tracked files were clean, is *the reference*; a page that merges runs, or
renders a run made with uncommitted changes (or whose state git could not tell), says so in a banner above
everything else. A run with errored trials says how many here too: an error is no verdict, and a reader deciding
from the first screen must know the count.
"""

from __future__ import annotations

from collections import Counter

from lab.checkers.outcomes import latest_per_trial
from lab.report.changes import changed_cells
from lab.decision.cells import UNSTABLE
from lab.report.sections import RunView, section
from lab.report.settled import settled_line

FLAG = "⚑"


def why_not_the_reference(run: RunView) -> list[str]:
    """The reasons this page is not one clean run, each a short clause; empty when it is the reference."""
    meta = run.meta
    reasons = []
    runs = meta.get("merged_provenance") or [{"git_commit": meta.get("git_commit"), "git_dirty": meta.get("git_dirty")}]
    if len(runs) > 1:
        commits = {r.get("git_commit") for r in runs}
        reasons.append(f"it merges {len(runs)} runs" + (f" made at {len(commits)} commits" if len(commits) > 1 else ""))
    dirty = sum(r.get("git_dirty") is True for r in runs)
    if dirty:
        reasons.append(f"{dirty} of its runs {'was' if dirty == 1 else 'were'} made with uncommitted changes"
                       if len(runs) > 1 else "its run was made with uncommitted changes")
    if any(r.get("git_dirty") is None for r in runs):
        reasons.append("a run of it did not record whether its tree had uncommitted changes")
    if any(not r.get("git_commit") for r in runs):
        reasons.append("a run of it did not record its commit")
    return reasons


@section(1)
def section_banner(run: RunView) -> str | None:
    meta = run.meta
    if not meta:
        return None
    bounds = (meta.get("bounds") or {}).get("run") or {}
    wall = f", {bounds['wall_s'] / 60:.1f} min of wall time" if bounds.get("wall_s") else ""
    machine = meta.get("machine") or {}
    where = f" on {machine.get('cores')} cores" if machine else ""
    commit = (meta.get("git_commit") or "an unknown commit")[:10]
    lines = []
    reasons = why_not_the_reference(run)
    if reasons:
        lines.append(f"> {FLAG} **Not a reference:** {'; '.join(reasons)}. Its verdicts cannot be traced to one "
                     "command at one commit; see *Provenance*.")
    else:
        lines.append(f"**The reference:** run `{run.run_id}`, made by `{meta.get('command', '')}` at commit "
                     f"`{commit}` on {meta.get('started', 'an unknown date')}{where}{wall}.")
    if run.previous_id:
        changed = changed_cells(run)
        now_pass = sum(1 for c in changed if c.passes_now)
        lines.append(f"Against the previous reference, `{run.previous_id}`: "
                     + (f"{len(changed)} cells changed their mark ({UNSTABLE}), {now_pass} of them from a failure to a "
                        f"pass ([every change](#changes-since-the-previous-reference))." if changed
                        else "no cell changed its mark."))
    settled = settled_line(meta)
    if settled:
        lines.append(settled)
    statuses = Counter(t.get("status") for t in latest_per_trial(run.trials))
    errors, total = statuses.get("error", 0), sum(statuses.values())
    if errors:
        lines.append(f"> {FLAG} **{errors} of {total} trials errored**: no verdict; the matrix says which cells they "
                     "leave incomplete.")
    return "\n\n".join(lines)
