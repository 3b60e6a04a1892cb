"""Charts drawn once: each PNG kept under a key that covers everything its bytes are drawn from.

A section does not draw a chart; it names one as a `Drawing`: a drawing function of the renderer's modules
(lab/report/charts.py, lab/report/history_chart.py) and the plain data it draws (a trial's history as recorded, the
matrix's marks, a table's bars). `lab report` then takes each PNG from the cache or draws it and keeps it there.

The key is a SHA-256 over the function's name, its data (every value and its type, dicts in their order) and the
renderer (`renderer()`): the source of the modules that draw, the versions of Python, matplotlib, FreeType, NumPy,
Pillow and the zlib Pillow writes with, matplotlib's settings in force (a matplotlibrc changes them) and the font
files matplotlib knows (each path, size and time). The same key draws the same bytes, so a PNG found under its key
is the one drawing it would write; anything that could change those bytes changes the key, so a stale entry is never
found, only left unused. An entry is written whole (a temporary file renamed) and read only when it is a whole PNG
(every chunk's CRC), else drawn again; the cache cannot fail a report: a folder that cannot be written is drawn
without.

Where: $LOCKLAB_CHART_CACHE, else $XDG_CACHE_HOME/locklab/charts, else ~/.cache/locklab/charts: outside the
repository and the run folders, shared by every run and checkout (an entry is named by its content, so sharing is
safe). LOCKLAB_CHART_CACHE=off draws every chart on every render, the slow path the cache must equal. Nothing prunes
it: deleting the folder costs one slow render.
"""

from __future__ import annotations

import functools
import hashlib
import multiprocessing
import os
import struct
import sys
import tempfile
import zlib
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ENVIRONMENT = "LOCKLAB_CHART_CACHE"
OFF = "off"

# The modules a drawing's bytes depend on: every drawing function is in one of the first two, which import from the
# lab nothing but each other and the third (tests/fast/test_chart_cache.py holds them to it).
RENDERER_MODULES = ("lab.report.charts", "lab.report.history_chart", "lab.checkers.ops")
DRAWING_MODULES = RENDERER_MODULES[:2]

PLAIN = (str, bytes, int, float, bool, type(None))


@dataclass(frozen=True)
class Drawing:
    """A chart to draw: function(*args, path=...) writes it as a PNG at path. Calling it draws it there."""

    function: Callable[..., None]
    args: tuple

    def __post_init__(self) -> None:
        if self.function.__module__ not in DRAWING_MODULES:
            raise ValueError(f"{self.function.__module__}.{self.function.__qualname__} draws outside the renderer's "
                             f"modules ({', '.join(DRAWING_MODULES)}): its key could not cover its code")
        _check_plain(self.args)

    def __call__(self, path: Path) -> None:
        self.function(*self.args, path=path)

    @property
    def name(self) -> str:
        return f"{self.function.__module__}.{self.function.__qualname__}"

    def key(self) -> str:
        """The hash of everything the PNG's bytes depend on: the renderer, the function, its data."""
        text = repr((renderer(), self.name, self.args))
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _check_plain(value) -> None:
    """Data a key can cover: its repr names every value and type (no object whose repr is its address)."""
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_plain(item)
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_plain(k)
            _check_plain(v)
    elif type(value) not in PLAIN:
        raise TypeError(f"a drawing's data holds a {type(value).__name__}: give it plain values (str, bytes, int, "
                        "float, bool, None, lists, tuples, dicts), so its key covers them")


@functools.cache
def renderer() -> str:
    """Everything besides its data that a drawing's bytes depend on, as one text (computed once a process)."""
    import importlib

    import matplotlib
    import numpy
    import PIL
    from matplotlib import font_manager, ft2font
    from PIL import features

    sources = []
    for name in RENDERER_MODULES:
        path = importlib.import_module(name).__file__
        assert path is not None
        sources.append((name, hashlib.sha256(Path(path).read_bytes()).hexdigest()))
    fonts = []
    for entry in sorted(font_manager.fontManager.ttflist, key=lambda f: (f.fname, f.name, f.style, str(f.weight))):
        try:
            stat = os.stat(entry.fname)
            found = (stat.st_size, stat.st_mtime_ns)
        except OSError:
            found = None
        fonts.append((entry.fname, entry.name, entry.style, entry.variant, str(entry.weight), entry.stretch, found))
    # Every setting but the backend (always Agg: charts.py), which reading would resolve by importing pyplot.
    settings = sorted((k, repr(matplotlib.rcParams[k])) for k in matplotlib.rcParams.keys() if k != "backend")
    return repr({
        "sources": sources, "python": sys.version, "matplotlib": matplotlib.__version__,
        "freetype": ft2font.__freetype_version__, "numpy": numpy.__version__, "pillow": PIL.__version__,
        "zlib": features.version("zlib"), "rc": settings, "fonts": fonts})


def cache_folder() -> Path | None:
    """Where PNGs are kept, or None when the cache is off."""
    given = os.environ.get(ENVIRONMENT)
    if given is not None:
        return None if given.strip().lower() in (OFF, "") else Path(given)
    home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(home) / "locklab" / "charts"


def pngs_of(drawings: Mapping[str, Drawing]) -> dict[str, bytes]:
    """Each drawing's PNG, by its name: the cached one when its key has one, else drawn now (draw_all) and kept,
    when it can be."""
    folder = cache_folder()
    entries = {name: None if folder is None else _entry(folder, drawing) for name, drawing in drawings.items()}
    found = {name: _cached(entry) for name, entry in entries.items()}
    missing = [name for name, png in found.items() if png is None]
    for name, png in zip(missing, draw_all([drawings[name] for name in missing])):
        found[name] = png
        _keep(entries[name], png)
    return {name: png for name, png in found.items() if png is not None}


def png_of(drawing: Drawing) -> bytes:
    """One drawing's PNG, as pngs_of gives it."""
    return pngs_of({"": drawing})[""]


def _entry(folder: Path, drawing: Drawing) -> Path:
    key = drawing.key()
    return folder / key[:2] / f"{key}.png"


def _cached(entry: Path | None) -> bytes | None:
    """The PNG kept at entry, if it is there whole."""
    try:
        found = entry.read_bytes() if entry is not None else None
    except OSError:
        return None
    return found if found is not None and whole_png(found) else None


def _keep(entry: Path | None, png: bytes) -> None:
    if entry is None:
        return
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=entry.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(png)
        os.replace(tmp, entry)
    except OSError:
        pass  # a cache that cannot be written only costs time


PER_WORKER = 8  # below this many charts per processor, drawing them here is quicker than starting workers


def draw_all(drawings: list[Drawing], workers: int | None = None) -> list[bytes]:
    """The drawings' PNGs, in order: in as many worker processes as this process may use processors, when there are
    PER_WORKER charts or more for each (a run's first render draws hundreds of timelines), else here. Each worker is a
    fresh interpreter (spawned): it draws what drawing here draws, byte for byte, and the report's own process never
    holds matplotlib's buffers (the matrix chart's are hundreds of MB)."""
    if workers is None:
        workers = min(processors(), len(drawings) // PER_WORKER)
    if workers <= 1:
        return [_draw(drawing) for drawing in drawings]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_draw, drawings, chunksize=max(1, min(PER_WORKER, len(drawings) // (4 * workers)))))


def processors() -> int:
    """The processors this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _draw(drawing: Drawing) -> bytes:
    with tempfile.TemporaryDirectory(prefix="locklab-chart-") as folder:
        path = Path(folder) / "chart.png"
        drawing(path)
        return path.read_bytes()


SIGNATURE = b"\x89PNG\r\n\x1a\n"


def whole_png(data: bytes) -> bool:
    """Whether data is a PNG written to its end: the signature, then chunks whose CRCs hold, the last one IEND."""
    if not data.startswith(SIGNATURE):
        return False
    at = len(SIGNATURE)
    while at + 12 <= len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind = data[at + 4:at + 8]
        end = at + 12 + length
        if end > len(data):
            return False
        (crc,) = struct.unpack(">I", data[end - 4:end])
        if zlib.crc32(data[at + 4:end - 4]) != crc:
            return False
        if kind == b"IEND":
            return end == len(data)
        at = end
    return False
