"""`lab report --compare A B`: what changed between two runs, outcome by outcome (contacts no server)."""

from __future__ import annotations

import re

from lab.harness.outcomes import outcome_rows
from lab.report.common import md_table
from lab.results import RunFolder


def _servers(folder: RunFolder) -> str:
    services = folder.meta().get("services", {})
    return ", ".join(f"{name} {info.get('version')} ({'embedded' if info.get('embedded') else 'external'})"
                     for name, info in sorted(services.items()))


def _kinds(outcome: str | None) -> frozenset[str]:
    """The outcomes a cell holds, without their counts: 'lost 1/1' and 'lost 3/3' are the same finding."""
    if outcome is None:
        return frozenset({"not run"})
    return frozenset(re.sub(r"\s+\d+/\d+", "", part).strip() for part in outcome.split(", "))


def compare(a: RunFolder, b: RunFolder) -> str:
    """A Markdown table of every (scenario, backend, variant) whose findings differ (counts aside)."""
    left = {(r.scenario, r.backend, r.variant): r.outcome for r in outcome_rows(a.trials(), a.meta())}
    right = {(r.scenario, r.backend, r.variant): r.outcome for r in outcome_rows(b.trials(), b.meta())}
    keys = list(left) + [k for k in right if k not in left]
    changed = [[*k, left.get(k, "not run"), right.get(k, "not run")] for k in keys
               if _kinds(left.get(k)) != _kinds(right.get(k))]
    same = len(keys) - len(changed)
    out = [f"# {a.run_id} against {b.run_id}", "",
           f"- A: {a.run_id}: {_servers(a)}, profile {a.meta().get('profile')}",
           f"- B: {b.run_id}: {_servers(b)}, profile {b.meta().get('profile')}", "",
           f"{len(changed)} outcomes differ; {same} are the same.", ""]
    if changed:
        out += [md_table(["scenario", "backend", "variant", f"A ({a.run_id})", f"B ({b.run_id})"], changed), ""]
    return "\n".join(out)
