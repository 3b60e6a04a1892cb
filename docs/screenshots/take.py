"""The screenshots beside this file, retaken from a rendered report: report.html's first screen at 1280 x 900
(the answer for every stack, then the grid), and REPORT.md's summary matrix as a Markdown viewer shows it (converted by the report's own lab/report/markdown_html.py,
with a plain stylesheet). Each is saved as a PNG of 256 colours, so it stays small.

    lab report results/<run-id> --output /tmp/r/REPORT.md --html
    python docs/screenshots/take.py /tmp/r
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

from lab.report.markdown_html import to_html

HERE = Path(__file__).resolve().parent
SUMMARY = "## Every backend under every family of faults"
CSS = ("body { font: 14px/1.5 system-ui, sans-serif; margin: 16px; color: #1f2328; } "
       "table { border-collapse: collapse; font-size: 13px; } th, td { border: 1px solid #d0d7de; padding: 4px 8px; } "
       "tr:nth-child(2n) td { background: #f6f8fa; } a { color: #0969da; text-decoration: none; }")


def small_png(png: bytes, path: Path) -> None:
    """Saved with a palette of 256 colours: a screenshot of text and flat colours looks the same."""
    Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256).save(path, optimize=True)
    print(f"{path}: {path.stat().st_size:,} bytes")


def main(folder: Path) -> int:
    missing = [name for name in ("REPORT.md", "report.html") if not (folder / name).is_file()]
    if missing:
        print(f"{folder} holds no {' and no '.join(missing)}: render it with lab report RUN --output "
              f"{folder}/REPORT.md --html", file=sys.stderr)
        return 2
    text = (folder / "REPORT.md").read_text()
    if SUMMARY not in text:
        print(f"{folder / 'REPORT.md'} has no summary matrix ({SUMMARY!r})", file=sys.stderr)
        return 2
    summary = SUMMARY + text.split(SUMMARY, 1)[1].split("\n## ", 1)[0]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto((folder / "report.html").as_uri(), wait_until="load")
        small_png(page.screenshot(), HERE / "report-html-first-screen.png")
        page.set_content(f"<!DOCTYPE html><style>{CSS}</style><body>{to_html(summary)}</body>")
        small_png(page.screenshot(full_page=True), HERE / "report-md-summary.png")
        browser.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python docs/screenshots/take.py FOLDER (where lab report wrote REPORT.md and report.html)",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))
