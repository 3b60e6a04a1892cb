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
