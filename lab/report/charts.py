"""Charts for the report, as PNG files beside REPORT.md; byte-stable for the same input.

Each drawing function takes plain data and path= (lab/report/chart_cache.py keeps what it draws, keyed by that data
and this module's source); matplotlib is imported when a chart is drawn, so a render whose charts are all cached
never loads it.
"""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """matplotlib's pyplot on the Agg backend (chosen before pyplot is first imported)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.patches
    import matplotlib.pyplot as plt

    return plt

# A timing row's overlaps -> bar colour: unsafe red, handed over safely green, not recorded amber.
HANDOVER_COLOURS = {"unsafe": "#c62828", "safe": "#2e7d32", "unknown": "#ef6c00"}


def timing_chart(rows: list[tuple], timeout: float, path: Path) -> None:
    """One bar per row from the earliest to the latest first overlap; rows without overlap say so.

    A row is (label, low, high) or (label, low, high, handover) with handover "unsafe", "safe" or
    "unknown" (the default: a run that did not record it)."""
    import matplotlib

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.2), dpi=100)
    shown = []
    for y, (_, low, high, *kind) in enumerate(reversed(rows)):
        if low is None:
            ax.text(timeout * 0.05, y, "no overlap", va="center", fontsize=8, color="#2e7d32")
        else:
            name = kind[0] if kind and kind[0] in HANDOVER_COLOURS else "unknown"
            shown.append(name)
            colour = HANDOVER_COLOURS[name]
            ax.barh(y, max(high - low, timeout * 0.005), left=low, height=0.5, color=colour)
            ax.text(high + timeout * 0.02, y, f"{low:.2f} to {high:.2f} s", va="center", fontsize=8)
    ax.axvline(timeout, color="black", linestyle="--", linewidth=1)
    ax.text(timeout, len(rows) - 0.4, f" timeout {timeout:g} s", fontsize=8)
    ax.set_yticks(range(len(rows)), [row[0] for row in reversed(rows)], fontsize=8)
    ax.set_xlim(0, timeout * 3)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    words = {"unsafe": "unsafe overlap", "safe": "handed over safely", "unknown": "handover not recorded"}
    handles = [matplotlib.patches.Patch(color=HANDOVER_COLOURS[k], label=words[k]) for k in HANDOVER_COLOURS
               if k in shown]
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="lower right")
    ax.set_xlabel("seconds after the long run took the lock (first short run to get it)")
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def ratio_chart(rows: list[tuple[str, float | None, float | None]], path: Path) -> None:
    """Cost per configuration as a ratio to one transaction for all: ours beside the post's."""
    plt = pyplot()
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


def latency_chart(rows: list[tuple[str, float | None, float | None, float | None]], path: Path) -> None:
    """Median acquire + release and handoff per backend (log scale), a black tick at its server's floor."""
    import matplotlib.ticker

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(rows) + 1.4), dpi=100)
    ys = range(len(rows))
    ordered = list(reversed(rows))
    ms = [[(v or 0) * 1e3 for v in values] for values in zip(*[r[1:] for r in ordered])] if rows else [[], [], []]
    ax.barh([y + 0.2 for y in ys], ms[0], height=0.4, color="#1565c0", label="acquire + release (median)")
    ax.barh([y - 0.2 for y in ys], ms[1], height=0.4, color="#ef6c00", label="handoff (median)")
    for y, floor in zip(ys, ms[2]):
        if floor:
            ax.plot([floor, floor], [y - 0.45, y + 0.45], color="black", linewidth=1.5)
    ax.plot([], [], color="black", linewidth=1.5, label="its server's floor (median)")
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_yticks(list(ys), [r[0] for r in ordered], fontsize=7)
    ax.set_xlabel("milliseconds (log scale)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / (len(rows) + 2)), ncol=3,
              frameon=False)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


# A matrix cell's mark (lab.report.matrix.Mark's name) -> (colour, symbol drawn on it).
MARK_COLOURS = {
    "FAILED": ("#c62828", "✗"),
    "KEPT": ("#2e7d32", "✓"),
    "NOT_EXERCISED": ("#b0c4de", "○"),  # light blue-grey: the fault never took the lock away
    "UNKNOWN": ("#f9a825", "?"),
    "LOST": ("#ef6c00", "⚠"),  # orange: the lock was lost, and no write followed to judge
    "STORE": ("#6a1b9a", "◆"),  # purple: the store lost acknowledged writes, as the no-lock control did
    "CONTROL": ("#78909c", "c"),  # slate: the no-lock control, what the store does on its own
}
OTHER_COLOUR = "#bdbdbd"  # n/a, does not run, error, not run


def matrix_chart(backends: list[str], faults: list[str], marks: list[list[str]], path: Path) -> None:
    """The backends x faults matrix as colours: red failed, green kept whole, light blue-grey not exercised,
    amber safety unknown, grey not applicable."""
    import matplotlib

    plt = pyplot()
    palette = [colour for colour, _ in MARK_COLOURS.values()] + [OTHER_COLOUR]
    index = {name: i for i, name in enumerate(MARK_COLOURS)}
    grid = [[index.get(mark, len(MARK_COLOURS)) for mark in row] for row in marks]
    fig, ax = plt.subplots(figsize=(1.1 * len(faults) + 2.5, 0.4 * len(backends) + 1.8), dpi=100)
    ax.imshow(grid, cmap=matplotlib.colors.ListedColormap(palette), vmin=-0.5, vmax=len(palette) - 0.5,
              aspect="auto", interpolation="nearest")
    for i, row in enumerate(marks):
        for j, mark in enumerate(row):
            symbol = MARK_COLOURS.get(mark, (None, ""))[1]
            ax.text(j, i, symbol, ha="center", va="center", color="black" if mark == "NOT_EXERCISED" else "white",
                    fontsize=9)
    ax.set_xticks(range(len(faults)), faults, rotation=35, ha="right", fontsize=7)
    ax.set_yticks(range(len(backends)), backends, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def palette_png(png: bytes, path: Path) -> None:
    """A PNG re-encoded with a palette of 256 colours when that is smaller (a chart has few colours, so it looks the
    same at about a third of the bytes), else as it was: how report.html embeds a picture; deterministic like the
    PNG itself."""
    import io

    from PIL import Image

    picture: Image.Image = Image.open(io.BytesIO(png))
    if picture.mode == "RGBA" and picture.getchannel("A").getextrema() == (255, 255):
        picture = picture.convert("RGB")
    if picture.mode == "RGB":
        out = io.BytesIO()
        picture.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(out, "PNG", optimize=True)
        png = min(png, out.getvalue(), key=len)
    path.write_bytes(png)


def lane_axes(ax, lanes: list[str], end: float, title: str) -> None:
    """The axes every timeline shares: one lane per process, top first, on the trial's own clock up to end."""
    ax.set_yticks(range(len(lanes)), list(reversed(lanes)), fontsize=8)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.set_xlim(-end * 0.03, end * 1.05)
    ax.set_xlabel("seconds (the trial's own clock)", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_title(title, fontsize=8)
    ax.grid(axis="x", linewidth=0.3, color="#e0e0e0")
