"""Every matrix cell whose mark changed between two rendered reports, before -> after, with the rule that explains it.

Usage: python benchmarks/mark_changes.py OLD_MATRIX.md NEW_MATRIX.md > changes.md

It reads the rendered Markdown only (a report's matrix tables: `| backend | ... |`), so it compares a report made by
an older lab with one made now. The reason is the first rule that fits, in this order: the cell did not exist or
ran nowhere before; the fault now reaches the lock by where it lives; the row is the no-lock control; the loss is
the store's; the contest rule took a ✓ that nobody else contested; a trial whose holder never got the lock; else
the trials themselves differ between the runs.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

SYMBOLS = [("✗", "✗"), ("✓", "✓"), ("○", "○"), ("?", "?"), ("⚠", "⚠"), ("◆", "◆"), ("control:", "control"),
           ("n/a", "n/a"), ("does not run", "does not run"), ("not run", "not run"), ("error", "error"),
           ("incomplete", "error")]
RAN = {"✗", "✓", "○", "?", "⚠", "◆", "control"}


def mark_of(text: str) -> str:
    for prefix, mark in SYMBOLS:
        if text.startswith(prefix):
            return mark
    return text.split(" ", 1)[0]


def cells(path: Path) -> dict[tuple[str, str], str]:
    """(backend, column heading) -> cell text, from every `| backend |` table of a Markdown file."""
    found: dict[tuple[str, str], str] = {}
    header: list[str] | None = None
    for line in path.read_text().splitlines():
        if line.startswith("| backend |"):
            header = [c.strip() for c in line.strip("|").split(" | ")]
            continue
        if header is None or not line.startswith("| ") or line.startswith("|---"):
            if not line.startswith("|"):
                header = None
            continue
        row = [c.strip() for c in line.strip("|").split(" | ")]
        for heading, text in zip(header[1:], row[1:]):
            if heading != "library":
                found[(row[0], heading)] = text
    return found


def why(before: str, after: str, old_text: str, new_text: str) -> str:
    if before not in RAN and after in RAN:
        if before == "n/a":
            return "now applies: the fault reaches the lock's fence or writes (declared where it lives)"
        return "ran nowhere in the old merge of runs; runs in the one-command reference"
    if after == "control":
        return "the no-lock control: shown as what the store does on its own, never ✓ or ✗"
    if after == "◆":
        return "an acknowledged write lost with the lock's promise kept, as the control lost one: the store's"
    if before == "✓" and after == "○":
        return "nobody else was granted or committed while the holder still believed it held (the contest rule)"
    if before == "⚠" and "not acquired" in old_text:
        return "the holder never got the lock: nothing was tested"
    if before in RAN and after not in RAN:
        return f"not run here ({new_text})"
    return "the trials differ between the two runs"


def main(old: Path, new: Path) -> None:
    a, b = cells(old), cells(new)
    rows, reasons = [], Counter()
    for key in sorted(set(a) | set(b)):
        before, after = mark_of(a.get(key, "not run")), mark_of(b.get(key, "not run"))
        if before == after:
            continue
        reason = why(before, after, a.get(key, ""), b.get(key, ""))
        reasons[reason] += 1
        rows.append(f"| {key[0]} | {key[1]} | {before} | {after} | {reason} |")
    print(f"{len(rows)} cells changed mark ({len(set(a) | set(b))} cells in either report).\n")
    print("| why | cells |\n|---|---|")
    for reason, n in reasons.most_common():
        print(f"| {reason} | {n} |")
    print("\n| backend | fault | before | after | why |\n|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
