"""A trial's history drawn as Jepsen draws one: intervals, one lane per process.

An operation is a bar from its invoke to its completion (coloured by how it completed); a right is a
band from its grant to the moment its holder asked to release it, heard it was gone, or the history
ended; a lease's validity (grant + TTL, when the trial recorded its TTL) is a hatched band beside it;
the fault's window (strike to heal) is shaded across every lane. Points are for what has no duration:
a told signal, an observer's row count. A history with clock readings (a clock fault's) gets a panel
under the lanes: each clock's offset from the real one, the real clock the zero line. Reads the history
alone (schema 2), like every report section.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab.checkers.ops import F, Op, Type, from_json

COMPLETION_COLOUR = {Type.OK: "#1565c0", Type.FAIL: "#c62828", Type.INFO: "#9e9e9e"}
FENCED_COLOUR = "#ef6c00"
RIGHT_COLOUR, LEASE_COLOUR, FAULT_COLOUR = "#a5d6a7", "#2e7d32", "#ffcdd2"
LANE_ORDER = ("fault", "injector", "holder", "long", "r0", "run1", "contender", "poller", "r1", "run2")


@dataclass(frozen=True)
class Bar:
    """One interval of a lane: what it was (op f, or 'right' / 'lease'), when, and how it ended."""

    lane: str
    what: str
    start: float
    end: float
    colour: str
    label: str = ""


def bars_of(ops: list[Op], ttl: float | None = None) -> tuple[list[Bar], list[tuple[float, float]], list[Op]]:
    """(bars, fault windows, point operations) of a history: the pure part of the picture, tested alone.

    An invoke opens a bar that the next completion of the same process, f and company closes; a completion
    with no invoke (a lock taken inside the write) is a bar of no length. A run-level grant opens its right.
    """
    last = max((o.time for o in ops), default=0.0)
    bars, points, windows = [], [], []
    opened: dict[tuple, float] = {}
    rights: dict[str, float] = {}
    fault_at = None

    def close_right(process: str, at: float) -> None:
        if process in rights:
            bars.append(Bar(process, "right", rights.pop(process), at, RIGHT_COLOUR))

    for o in ops:
        key = (o.process, o.f, o.get("company"))
        if o.f is F.FAULT:
            fault_at = o.time if fault_at is None else fault_at
        elif o.f is F.HEAL:
            windows.append((last if fault_at is None else fault_at, o.time))
            fault_at = None
        elif o.f in (F.COMMIT, F.CLOCK):
            continue  # COMMIT sent: a moment inside the write's bar; a clock reading goes to the clock panel
        elif o.f in (F.TOLD, F.OBSERVE, F.HELD):
            points.append(o)
            if o.f is F.TOLD or (o.f is F.HELD and o.get("held") is False):
                close_right(o.process, o.time)
        elif o.type is Type.INVOKE:
            opened.setdefault(key, o.time)
            if o.f is F.RELEASE:
                close_right(o.process, o.time)
        else:
            start = opened.pop(key, o.time)
            colour = FENCED_COLOUR if o.get("fenced") else COMPLETION_COLOUR[o.type]
            bars.append(Bar(o.process, o.f.value, start, o.time, colour, o.type.value))
            if o.f is F.ACQUIRE and o.type is Type.OK and o.get("scope") == "run":
                rights[o.process] = o.time
                if ttl:
                    bars.append(Bar(o.process, "lease", o.time, o.time + ttl, LEASE_COLOUR))
    if fault_at is not None:
        windows.append((fault_at, last))
    for process in list(rights):
        close_right(process, last)
    for (process, f, _), begun in opened.items():  # invoked and never completed: a killed run's
        bars.append(Bar(process, f.value, begun, last, COMPLETION_COLOUR[Type.INFO], "open"))
    return bars, windows, points


def clock_series(ops: list[Op]) -> dict[str, list[tuple[float, float]]]:
    """Each clock's readings as (time, offset from the real clock in seconds), in time order: what the clock
    panel draws. A clock is named by whose it is (the lock's server, the holder)."""
    series: dict[str, list[tuple[float, float]]] = {}
    for o in ops:
        if o.f is F.CLOCK and o.get("offset_s") is not None:
            series.setdefault(str(o.get("clock", o.process)), []).append((o.time, float(o.get("offset_s"))))
    return series


def lanes_of(ops: list[Op]) -> list[str]:
    names = sorted({o.process for o in ops if o.f not in (F.FAULT, F.HEAL, F.CLOCK)},
                   key=lambda p: (LANE_ORDER.index(p) if p in LANE_ORDER else len(LANE_ORDER), p))
    return [n for n in names if n != "observer"] + (["observer"] if "observer" in names else [])


def recorded_history_chart(history: list[dict], title: str, ttl: float | None, path: Path) -> None:
    """history_chart() of a history as a trial record holds it (lab/checkers/ops.py's JSON form): what the report's
    timelines are drawn from, and cached by (lab/report/chart_cache.py)."""
    history_chart(from_json(history), title, path, ttl)


def history_chart(ops: list[Op], title: str, path: Path, ttl: float | None = None) -> None:
    """Draw the history's intervals, one lane per process, the fault's window shaded."""
    import matplotlib.patches

    from lab.report.charts import lane_axes, pyplot

    plt = pyplot()

    bars, windows, points = bars_of(ops, ttl)
    lanes = lanes_of(ops) or ["(empty)"]
    clocks = clock_series(ops)
    height = 0.45 * len(lanes) + 1.6
    if clocks:
        fig, (ax, clock_ax) = plt.subplots(2, 1, figsize=(7, height + 1.4), dpi=72, layout="constrained",
                                           sharex=True, gridspec_kw={"height_ratios": [height, 1.4]})
    else:
        fig, ax = plt.subplots(figsize=(7, height), dpi=72, layout="constrained")
    end = max([o.time for o in ops] + [b.end for b in bars] + [1e-3])
    row = {lane: len(lanes) - 1 - i for i, lane in enumerate(lanes)}
    for start, stop in windows:
        ax.axvspan(start, stop, color=FAULT_COLOUR, alpha=0.6, zorder=0, linewidth=0)
    for bar in bars:
        if bar.lane not in row:
            continue
        y = row[bar.lane]
        if bar.what == "right":
            ax.barh(y, bar.end - bar.start, left=bar.start, height=0.7, color=bar.colour, alpha=0.5, zorder=1)
        elif bar.what == "lease":
            ax.barh(y + 0.3, bar.end - bar.start, left=bar.start, height=0.1, color=bar.colour, zorder=2)
        else:
            width = max(bar.end - bar.start, end * 0.004)
            ax.barh(y - 0.1, width, left=bar.start, height=0.3, color=bar.colour, zorder=3)
    for o in points:
        if o.process not in row:
            continue
        y = row[o.process]
        if o.f is F.OBSERVE:
            ax.annotate(str(o.get("count")), (o.time, y), fontsize=6, ha="center", va="center", color="#616161")
        else:
            ax.scatter([o.time], [y + 0.25], marker="*", color="#6a1b9a", s=50, zorder=4)
    lane_axes(ax, lanes, end, title)
    legend = [("right held (grant to release, told or end)", RIGHT_COLOUR), ("lease valid (grant + TTL)", LEASE_COLOUR),
              ("fault window", FAULT_COLOUR), ("op ok", COMPLETION_COLOUR[Type.OK]),
              ("op failed", COMPLETION_COLOUR[Type.FAIL]), ("refused by the fence", FENCED_COLOUR),
              ("unknown / never completed", COMPLETION_COLOUR[Type.INFO])]
    handles = [matplotlib.patches.Patch(color=colour, label=text) for text, colour in legend]
    if clocks:
        fig.legend(handles=handles, fontsize=6, ncol=4, loc="outside lower center", frameon=False)
        _clock_panel(clock_ax, clocks, windows)
    else:
        ax.legend(handles=handles, fontsize=6, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


CLOCK_COLOURS = ("#6a1b9a", "#00838f", "#ef6c00", "#5d4037")


def _clock_panel(ax, clocks: dict[str, list[tuple[float, float]]], windows) -> None:
    """Each clock's offset from the real one over the trial, as steps between readings; the real clock is 0."""
    for start, stop in windows:
        ax.axvspan(start, stop, color=FAULT_COLOUR, alpha=0.6, zorder=0, linewidth=0)
    ax.axhline(0.0, color="#424242", linewidth=0.8, linestyle="--", label="the real clock")
    for i, (name, points) in enumerate(sorted(clocks.items())):
        times, offsets = [t for t, _ in points], [v for _, v in points]
        ax.step(times, offsets, where="post", color=CLOCK_COLOURS[i % len(CLOCK_COLOURS)], linewidth=1.2,
                marker=".", markersize=4, label=f"{name}'s clock")
    ax.set_ylabel("offset (s)", fontsize=7)
    ax.set_xlabel("seconds (the trial's own clock)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(linewidth=0.3, color="#e0e0e0")
    ax.legend(fontsize=6, loc="upper right", frameon=False)
