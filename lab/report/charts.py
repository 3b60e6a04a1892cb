"""Charts for the report, as PNG files beside REPORT.md; byte-stable for the same input."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)


def timing_chart(rows: list[tuple[str, float | None, float | None]], timeout: float, path: Path) -> None:
    """One bar per row from the earliest to the latest first overlap; rows without overlap say so."""
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.2), dpi=100)
    for y, (_, low, high) in enumerate(reversed(rows)):
        if low is None:
            ax.text(timeout * 0.05, y, "no overlap", va="center", fontsize=8, color="#2e7d32")
        else:
            ax.barh(y, max(high - low, timeout * 0.005), left=low, height=0.5, color="#c62828")
            ax.text(high + timeout * 0.02, y, f"{low:.2f} to {high:.2f} s", va="center", fontsize=8)
    ax.axvline(timeout, color="black", linestyle="--", linewidth=1)
    ax.text(timeout, len(rows) - 0.4, f" timeout {timeout:g} s", fontsize=8)
    ax.set_yticks(range(len(rows)), [label for label, _, _ in reversed(rows)], fontsize=8)
    ax.set_xlim(0, timeout * 3)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel("seconds after the long run took the lock (first short run to get it)")
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def ratio_chart(rows: list[tuple[str, float | None, float | None]], path: Path) -> None:
    """Cost per configuration as a ratio to one transaction for all: ours beside the post's."""
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(rows) + 1.2), dpi=100)
    ys = range(len(rows))
    ours = [r[1] or 0 for r in reversed(rows)]
    post = [r[2] or 0 for r in reversed(rows)]
    ax.barh([y + 0.2 for y in ys], ours, height=0.4, color="#1565c0", label="measured here")
    ax.barh([y - 0.2 for y in ys], post, height=0.4, color="#9e9e9e", label="the post")
    ax.set_yticks(list(ys), [r[0] for r in reversed(rows)], fontsize=7)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("time relative to one transaction for all companies (same run)")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def matrix_chart(backends: list[str], faults: list[str], cells: list[list[str]], path: Path) -> None:
    """The backends x faults matrix as colours: red failed, green kept whole, grey not applicable."""
    colours = {"✗": 0.0, "✓": 1.0}
    grid = [[colours.get(text[:1], 0.5) for text in row] for row in cells]
    fig, ax = plt.subplots(figsize=(1.1 * len(faults) + 2.5, 0.4 * len(backends) + 1.8), dpi=100)
    ax.imshow(grid, cmap=matplotlib.colors.ListedColormap(["#c62828", "#bdbdbd", "#2e7d32"]), vmin=0, vmax=1,
              aspect="auto")
    for i, row in enumerate(cells):
        for j, text in enumerate(row):
            ax.text(j, i, text[:1] if text[:1] in colours else "", ha="center", va="center", color="white", fontsize=9)
    ax.set_xticks(range(len(faults)), faults, rotation=35, ha="right", fontsize=7)
    ax.set_yticks(range(len(backends)), backends, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
