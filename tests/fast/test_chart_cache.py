"""The chart cache (lab/report/chart_cache.py): a render that copies its charts from the cache writes the bytes a render
that draws them writes, and a chart whose data or renderer changed is drawn again, never taken from the cache."""

from __future__ import annotations

import ast
import copy
import importlib
from pathlib import Path

import pytest

from lab.report import chart_cache, write_report
from lab.report.chart_cache import Drawing, draw_all, png_of, whole_png
from lab.report.charts import matrix_chart
from lab.report.history_chart import recorded_history_chart
from lab.records.results import RunFolder
from tests.fast.planted import saved_run

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "results" / "20261204-222637-478b"  # the committed reference run (docs/report.md)
BACKENDS, SCENARIOS = ("none", "session", "redis"), ("pause", "cut")


def small_run(root: Path) -> RunFolder:
    """Three backends under two of the reference run's lease faults, where two locks fail: a matrix and four
    timelines to draw."""
    source = RunFolder(REFERENCE)
    meta = copy.deepcopy(source.meta())
    meta["backends"] = meta["backend_order"] = [b for b in meta["backend_order"] if b in BACKENDS]
    meta["scenarios"] = meta["scenario_order"] = [s for s in meta["scenario_order"] if s in SCENARIOS]
    return saved_run(root / "small-run", meta, (r for r in source.records()
                                                if r["backend"] in BACKENDS and r["scenario"] in SCENARIOS))


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


class Drawn:
    """Counts the charts drawn (not taken from the cache)."""

    def __init__(self, monkeypatch):
        self.names: list[str] = []
        draw = chart_cache._draw

        def counted(drawing: Drawing) -> bytes:
            self.names.append(drawing.name)
            return draw(drawing)

        monkeypatch.setattr(chart_cache, "_draw", counted)


def test_a_render_from_the_cache_is_byte_for_byte_the_render_that_draws(tmp_path, monkeypatch):
    folder = small_run(tmp_path / "results")
    drawn = Drawn(monkeypatch)
    renders = {}
    for name, cache in (("slow", "off"), ("cold", str(tmp_path / "cache")), ("warm", str(tmp_path / "cache"))):
        monkeypatch.setenv(chart_cache.ENVIRONMENT, cache)
        drawn.names.clear()
        out = write_report(folder, tmp_path / name / "REPORT.md", html=True)
        renders[name] = (files_of(out.parent), list(drawn.names))
    slow, drew = renders["slow"]
    timelines = [name for name in slow if name.startswith("timelines/")]
    assert "matrix.png" in slow and len(timelines) >= 2 and "report.html" in slow
    assert renders["cold"] == (slow, drew)  # an empty cache: every chart drawn, the same bytes
    assert renders["warm"] == (slow, [])  # every chart from the cache: nothing drawn, the same bytes


def test_charts_drawn_in_worker_processes_are_the_bytes_drawn_here():
    """A first render draws its charts in worker processes (draw_all): each the bytes this process draws."""
    history = [{"process": "holder", "type": "ok", "f": "acquire", "time": 0.0, "value": {"scope": "run"}},
               {"process": "contender", "type": "ok", "f": "acquire", "time": 1.5, "value": {"scope": "run"}}]
    drawings = [Drawing(matrix_chart, (["redis", "session"], ["pause", "cut"], [["FAILED", "KEPT"], ["KEPT", "STORE"]])),
                Drawing(recorded_history_chart, (history, "pause/redis/sigstop/0", 1.0)),
                Drawing(recorded_history_chart, (history, "cut/redis/blackhole/0", None))]
    assert draw_all(drawings, workers=2) == draw_all(drawings, workers=1)


def test_a_changed_history_title_or_ttl_is_drawn_again(tmp_path, monkeypatch):
    monkeypatch.setenv(chart_cache.ENVIRONMENT, str(tmp_path / "cache"))
    drawn = Drawn(monkeypatch)
    history = [{"process": "holder", "type": "ok", "f": "acquire", "time": 0.0, "value": {"scope": "run"}},
               {"process": "holder", "type": "invoke", "f": "write", "time": 0.5, "value": {"company": 1}},
               {"process": "holder", "type": "ok", "f": "write", "time": 0.9, "value": {"company": 1}}]
    first = Drawing(recorded_history_chart, (history, "pause/redis/sigstop/0", 1.0))
    png = png_of(first)
    assert png_of(Drawing(recorded_history_chart, (copy.deepcopy(history), "pause/redis/sigstop/0", 1.0))) == png
    assert len(drawn.names) == 1  # the same history: from the cache
    later = copy.deepcopy(history)
    later[2]["time"] = 0.95  # one operation completed later
    changed = [Drawing(recorded_history_chart, (later, "pause/redis/sigstop/0", 1.0)),
               Drawing(recorded_history_chart, (history, "pause/redis/sigstop/1", 1.0)),
               Drawing(recorded_history_chart, (history, "pause/redis/sigstop/0", 2.0)),
               Drawing(recorded_history_chart, (history, "pause/redis/sigstop/0", 1))]  # an int is not its float
    assert len({first.key(), *(d.key() for d in changed)}) == 5
    for drawing in changed:
        png_of(drawing)
    assert len(drawn.names) == 5  # each drawn, none taken for another


def test_a_changed_renderer_misses_the_cache(tmp_path, monkeypatch):
    """A new version of the drawing code, matplotlib, a font or a setting is a new renderer: every chart is drawn."""
    monkeypatch.setenv(chart_cache.ENVIRONMENT, str(tmp_path / "cache"))
    drawn = Drawn(monkeypatch)
    drawing = Drawing(matrix_chart, (["redis"], ["pause"], [["FAILED"]]))
    png_of(drawing)
    key = drawing.key()
    renderer = chart_cache.renderer()
    for changed in (renderer.replace("'matplotlib': '", "'matplotlib': '0"), renderer + "a changed source"):
        monkeypatch.setattr(chart_cache, "renderer", lambda text=changed: text)
        assert drawing.key() != key
        png_of(drawing)
    assert len(drawn.names) == 3


def test_the_renderer_covers_the_drawing_code_and_its_libraries():
    text = chart_cache.renderer()
    for module in chart_cache.RENDERER_MODULES:
        assert module in text
    for word in ("matplotlib", "freetype", "numpy", "pillow", "zlib", "font.family", "DejaVuSans"):
        assert word in text, word


def test_the_drawing_modules_import_from_the_lab_only_what_the_key_covers():
    """Every drawing function's code is in the renderer's modules, which import from the lab nothing but each
    other: a change to any code a chart's bytes depend on changes its key."""
    for name in chart_cache.RENDERER_MODULES:
        path = Path(importlib.import_module(name).__file__)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("lab", "backends",
                                                                                                  "scenarios"):
                assert node.module in chart_cache.RENDERER_MODULES, (name, node.module)
            if isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] in ("lab", "backends", "scenarios") for a in node.names), name
    with pytest.raises(ValueError, match="outside the renderer"):
        Drawing(files_of, (Path("."),))
    with pytest.raises(TypeError, match="plain values"):
        Drawing(matrix_chart, (["redis"], ["pause"], [[object()]]))


def test_a_torn_or_corrupt_entry_is_drawn_again(tmp_path, monkeypatch):
    monkeypatch.setenv(chart_cache.ENVIRONMENT, str(tmp_path / "cache"))
    drawn = Drawn(monkeypatch)
    drawing = Drawing(matrix_chart, (["redis"], ["pause"], [["KEPT"]]))
    png = png_of(drawing)
    assert whole_png(png)
    (entry,) = (tmp_path / "cache").rglob("*.png")
    for broken in (png[: len(png) // 2], png[:60] + bytes([png[60] ^ 1]) + png[61:]):
        entry.write_bytes(broken)
        assert not whole_png(broken)
        assert png_of(drawing) == png
        assert entry.read_bytes() == png  # replaced by the drawn one
    assert len(drawn.names) == 3


def test_a_cache_that_cannot_be_written_only_costs_time(tmp_path, monkeypatch):
    drawing = Drawing(matrix_chart, (["redis"], ["pause"], [["KEPT"]]))
    monkeypatch.setenv(chart_cache.ENVIRONMENT, "off")
    assert chart_cache.cache_folder() is None
    slow = png_of(drawing)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(chart_cache.ENVIRONMENT, str(blocked / "charts"))
    assert png_of(drawing) == slow
