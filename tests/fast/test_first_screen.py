"""REPORT.md's decision fits two minutes of reading (issue 60): before the summary matrix, at most 40 lines and 600
words, none of those lines over 400 characters. Held on the committed REPORT.md, the file a reader opens, and on
a report rendered from a planted run, so that a change to the words fails here before a reference is made."""

from __future__ import annotations

from pathlib import Path

from lab.report import write_report
from lab.report.fault_summary import SUMMARY_HEADING
from tests.fast.test_html_report import small_run

REPORT = Path(__file__).resolve().parents[2] / "REPORT.md"
MOST_LINES, MOST_WORDS, LONGEST = 40, 600, 400


def first_screen(text: str) -> list[str]:
    """The lines before the summary matrix's heading."""
    lines = text.splitlines()
    return lines[:lines.index(f"## {SUMMARY_HEADING}")]


def assert_fits(text: str) -> None:
    lines = first_screen(text)
    words = sum(len(line.split()) for line in lines)
    longest = max(lines, key=len)
    assert len(lines) <= MOST_LINES, f"{len(lines)} lines before the summary matrix"
    assert words <= MOST_WORDS, f"{words} words before the summary matrix"
    assert len(longest) <= LONGEST, f"a line of {len(longest)} characters: {longest[:80]}..."


def test_the_committed_reports_decision_fits_two_minutes_of_reading():
    assert_fits(REPORT.read_text())


def test_a_rendered_reports_decision_fits_as_well(tmp_path):
    out = write_report(small_run(tmp_path / "results"), tmp_path / "out" / "REPORT.md")
    text = out.read_text()
    assert "## Which lock, for which need" in text
    assert_fits(text)


def test_every_stack_gets_the_same_answer_in_report_md_report_html_and_the_doctor():
    """One decision: REPORT.md's needs (decision_of), the answer report.html shows for every stack and `lab doctor
    --advise --json` for a stack with every service and every fact unknown (both advise()) rank the same locks."""
    from lab.report import run_view
    from lab.report.advice import advise
    from lab.report.decide import decision_of
    from lab.stack.choices import EVERY_STACK, stack_of
    from tests.fast.test_reference_report import reference

    folders, _ = reference()
    view = run_view(folders)
    report = {a.title: [s.backend for s in a.ranked] for a in decision_of(view).needs}
    advice = advise(view, stack_of(EVERY_STACK.services, EVERY_STACK.values))
    assert advice.needs
    for need in advice.needs:  # the MariaDB need is the report's alone: no stack of the panel runs MariaDB
        assert [k.backend for k in need.qualifying] == report[need.need], need.need
