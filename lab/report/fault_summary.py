"""The summary matrix, right after the decision: every backend against every family of faults, each cell the worst
mark of the family's cells with its counts. The cells themselves are in the matrix appendix (lab/report/
matrix_split.py), a section per family, which each heading links to."""

from __future__ import annotations

from lab.declarations.columns import FaultFamily
from lab.report.common import md_table
from lab.report.fault_groups import Summary, summary_tables
from lab.decision.cells import Mark, severity
from lab.report.sections import MATRIX, RunView, section
from lab.report.summary import anchor

SUMMARY_HEADING = "Every backend under every family of faults"  # the first screen ends here (issue 60)

# What each mark means in a count; a mark missing here is shown by its sign alone.
MARK_WORDS = {Mark.FAILED: "failed", Mark.LOST: "lost, no write to judge", Mark.ERROR: "a trial errored",
              Mark.UNKNOWN: "safety unknown", Mark.NOT_RUN: "the lab could not run it",
              Mark.DOES_NOT_RUN: "the library cannot work here", Mark.NOT_EXERCISED: "not exercised",
              Mark.KEPT: "kept the company whole", Mark.NOT_APPLICABLE: "the fault does not apply"}


SUMMARY_ORDER = 11  # right after the decision (10), before the why-not table (12)


def family_title(family: FaultFamily) -> str:
    """The heading of a family's section in the matrix appendix: 'Managed failover'."""
    return family.heading.capitalize()


def family_link(family: FaultFamily) -> str:
    """Where a family's own cells are: its section of the matrix appendix."""
    return f"{MATRIX}#{anchor(family_title(family))}"


def headers(summary: Summary) -> list[str]:
    """The summary table's header: the backend, then each family linked to its section of the appendix."""
    return ["backend", *[f"[{f.heading}]({family_link(f)})" for f in summary.families]]


def body(summary: Summary) -> list[list[str]]:
    return [[backend, *[c.text for c in cells]] for backend, cells in summary.rows]


def marks_legend(summaries: list[Summary]) -> str:
    """The marks these tables show, worst first, each with its words: '✗ failed; ✓ kept the company whole; n/a (the
    fault does not apply)'."""
    shown = sorted({mark for summary in summaries for _, cells in summary.rows for c in cells for mark, _ in c.counts},
                   key=severity)
    return "; ".join(mark.value if mark not in MARK_WORDS else f"{mark.value} {MARK_WORDS[mark]}"
                     if len(mark.value) == 1 else f"{mark.value} ({MARK_WORDS[mark]})" for mark in shown)


@section(SUMMARY_ORDER)
def section_fault_summary(run: RunView) -> str | None:
    tables = summary_tables(run)
    if not tables:
        return None
    out = [f"## {SUMMARY_HEADING}", "",
           "Each cell sums a family of faults for a backend: its worst mark first, then how many of the family's "
           f"faults gave each mark, worst first ({marks_legend([t.summary for t in tables])}). Each heading links to "
           f"that family's own cells, with their trial counts, in [{MATRIX}]({MATRIX}); in report.html a family "
           "opens into its faults.", ""]
    for table in tables:
        out += ([f"### {table.title}", ""] if table.title else []) + [md_table(headers(table.summary),
                                                                                body(table.summary)), ""]
    return "\n".join(out)
