"""`lab report --compare A B`: what changed between two runs, outcome by outcome (contacts no server)."""

from __future__ import annotations

from lab.harness.outcomes import findings, outcome_groups, outcome_text
from lab.report.common import md_table
from lab.results import RunFolder


def _servers(folder: RunFolder) -> str:
    services = folder.meta().get("services", {})
    return ", ".join(f"{name} {info.get('version')} ({'embedded' if info.get('embedded') else 'external'})"
                     for name, info in sorted(services.items()))


def compare(a: RunFolder, b: RunFolder) -> str:
    """A Markdown table of every (scenario, backend, variant) whose findings differ (counts aside)."""
    left, right = outcome_groups(a.trials(), a.meta()), outcome_groups(b.trials(), b.meta())
    keys = list(left) + [k for k in right if k not in left]

    def found(groups, key):  # compared as typed findings from the records, never by reading the text
        return findings(groups[key]) if key in groups else frozenset({"not run"})

    def shown(groups, key):
        return outcome_text(groups[key]) if key in groups else "not run"

    changed = [[*k, shown(left, k), shown(right, k)] for k in keys if found(left, k) != found(right, k)]
    same = len(keys) - len(changed)
    out = [f"# {a.run_id} against {b.run_id}", "",
           f"- A: {a.run_id}: {_servers(a)}, profile {a.meta().get('profile')}",
           f"- B: {b.run_id}: {_servers(b)}, profile {b.meta().get('profile')}", "",
           f"{len(changed)} outcomes differ; {same} are the same.", ""]
    if changed:
        out += [md_table(["scenario", "backend", "variant", f"A ({a.run_id})", f"B ({b.run_id})"], changed), ""]
    return "\n".join(out)
