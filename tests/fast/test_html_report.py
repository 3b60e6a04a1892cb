"""The Markdown converter of report.html (lab/report/markdown_html.py): the subset the report writes, and
nothing else."""

import re
from pathlib import Path

from lab.report.markdown_html import to_html

ROOT = Path(__file__).resolve().parents[2]


# The converter, on the Markdown subset the report writes.
def test_the_converter_renders_the_reports_markdown_subset():
    text = "\n".join([
        "# Title", "", "A paragraph with `code <b>`, *emphasis*, **bold** and a [link](REPORT-outcomes.md);",
        "its second line, and ![a chart](matrix.png).", "",
        "- one item with `x`", "  continued", "- **two**", "",
        "| backend | cell |", "|---|---|", "| `a\\|b` | ✗ *lost* 1/1 |", "| c |  |", "",
        "```", "run 0: <raw> *not emphasis*", "```", "", "## Title", ""])
    html = to_html(text)
    assert '<h1 id="title">Title</h1>' in html and '<h2 id="title-2">Title</h2>' in html  # ids unique
    assert ("<p>A paragraph with <code>code &lt;b&gt;</code>, <em>emphasis</em>, <strong>bold</strong> and a "
            '<a href="REPORT-outcomes.md">link</a>;\nits second line, and <img src="matrix.png" alt="a chart">.</p>'
            in html)
    assert "<ul>\n<li>one item with <code>x</code>\ncontinued</li>\n<li><strong>two</strong></li>\n</ul>" in html
    assert "<thead><tr><th>backend</th><th>cell</th></tr></thead>" in html
    assert "<tr><td><code>a|b</code></td><td>✗ <em>lost</em> 1/1</td></tr>" in html  # \\| is a pipe in the cell
    assert "<tr><td>c</td><td></td></tr>" in html
    assert "<pre><code>run 0: &lt;raw&gt; *not emphasis*</code></pre>" in html


def test_the_converter_escapes_what_is_not_in_the_subset_and_leaves_lone_asterisks():
    html = to_html("Lock(<key>) <script>x</script> & 2 * 3 * 4, snake*case*word, \\*literal\\*\n")
    assert html == ("<p>Lock(&lt;key&gt;) &lt;script&gt;x&lt;/script&gt; &amp; 2 * 3 * 4, snake*case*word, "
                    "*literal*</p>\n")


def test_the_converters_hooks_place_pictures_links_and_a_table_of_their_own():
    html = to_html("![m](matrix.png) [gone](elsewhere.md) [kept](REPORT.md)\n\n| a |\n|---|\n| 1 |\n",
                   image=lambda src, alt: f'<img src="data:{src}">', link=lambda href: None if "gone" in href
                   or href == "elsewhere.md" else "#" + href, table=lambda headers, rows: f"<table>{rows}</table>")
    assert '<img src="data:matrix.png"> gone <a href="#REPORT.md">kept</a>' in html
    assert "<table>[['1']]</table>" in html


def test_the_converter_leaves_no_markdown_behind_in_the_committed_report():
    """Every heading and table of the committed report becomes HTML; no asterisk or backtick of markup is left."""
    for name in ("REPORT.md", "REPORT-outcomes.md", "REPORT-timelines.md"):
        text = (ROOT / name).read_text()
        html = to_html(text)
        assert html.count("<table>") == len(re.findall(r"^\|.*\n\|---", text, re.M)), name
        assert len(re.findall(r"<h[1-3] ", html)) == len(re.findall(r"^#{1,3} ", text, re.M)), name
        outside_code = re.sub(r"<(code|pre)>.*?</\1>", "", html, flags=re.S)
        assert "*" not in outside_code and "`" not in outside_code, name
