"""How long is the report and how quick is its page? Renders runs to a temp folder (as `lab report RUN... --html`)
and prints REPORT.md's and each appendix's lines and widest table (columns, characters), then report.html's size,
the bytes of its cells' data and pictures, and its time to first paint in Debian's Chromium (the median and
minimum of N loads from disk, Playwright's paint entries).

    python benchmarks/report_page.py results/<run-id> [results/<run-id> ...] [--loads 15] [--keep DIR]

Figures, not assertions: the machine is shared, so a first paint is a median of several loads, never one.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

import scenarios
from lab.report import declared, write_report
from lab.report.html import PAGE
from lab.records.results import RunFolder

ROW = re.compile(r"(?<!\\)\|")


def table_widths(text: str) -> list[tuple[int, int]]:
    """(columns, widest line in characters) of every Markdown table of a text."""
    lines, found, i = text.split("\n"), [], 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            end = i + 2
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            found.append((len(ROW.split(lines[i].strip().strip("|"))), max(len(ln) for ln in lines[i:end])))
            i = end
        else:
            i += 1
    return found


def first_paint(page: Path, loads: int) -> list[float]:
    """Milliseconds from navigation to first paint, one figure per load of the page from disk."""
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        for _ in range(loads):
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            tab.goto(page.as_uri(), wait_until="load")
            tab.wait_for_timeout(100)
            paints = tab.evaluate("performance.getEntriesByType('paint').map(e => [e.name, e.startTime])")
            out.append(dict(paints)["first-paint"])
            tab.close()
        browser.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--loads", type=int, default=15)
    parser.add_argument("--keep", type=Path, help="render into this folder (kept) instead of a temp one")
    args = parser.parse_args()
    missing = [str(r) for r in args.runs if not (r / "meta.json").is_file()]
    if missing:
        print(f"not a run folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    declared.install(scenarios.fault_columns())  # as `lab report` does, for runs that did not record theirs
    with tempfile.TemporaryDirectory() as temp:
        folder = args.keep or Path(temp)
        out = write_report([RunFolder(r) for r in args.runs], folder / "REPORT.md", html=True)
        for name in sorted(p.name for p in out.parent.glob("REPORT*.md")):
            text = (out.parent / name).read_text()
            widths = table_widths(text)
            columns, characters = max(widths) if widths else (0, 0)
            print(f"{name}: {text.count(chr(10))} lines, {len(text.encode()):,} bytes, {len(widths)} tables, widest "
                  f"{columns} columns; longest table line {max((c for _, c in widths), default=0)} characters")
        page = out.parent / PAGE
        text = page.read_text()
        cells = sum(len(b) for b in re.findall(r'id="cells-\d+">(.*?)</script>', text, re.S))
        pictures = sum(len(b) for b in re.findall(r'id="png-\d+">(.*?)</script>', text, re.S))
        print(f"{PAGE}: {page.stat().st_size:,} bytes ({cells:,} of cells' data, {pictures:,} of PNG pictures)")
        paints = first_paint(page, args.loads)
        print(f"first paint: median {statistics.median(paints):.0f} ms, min {min(paints):.0f} ms "
              f"({args.loads} loads in Chromium)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
