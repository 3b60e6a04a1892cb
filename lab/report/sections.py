"""How a report section joins the report: one signature, one decorator, a declared place.

Every section is a function of one `RunView` (the run's trials as a frame, its meta.json, the raw trial
records, the run's name, and the charts it may add) returning its Markdown or None (nothing to say for
this run). `@section(order)` registers it where it is defined; `lab.report` imports every module of this
package, so a new section is one new file. The order is a number, so a section goes between two others
without renumbering them.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field
from typing import Callable, TypeVar

import pandas as pd

from lab.measures.kinds import Measured
from lab.report.common import ok_trials, trials_frame


@dataclass(frozen=True)
class RunView:
    """What a section may read: nothing but the run's own files, arranged once."""

    frame: pd.DataFrame
    meta: dict
    trials: list[dict]
    run_id: str
    # picture name -> its Drawing (lab/report/chart_cache.py), for the PNGs a section links
    charts: dict = field(default_factory=dict)
    # The previous reference's trials and its run id (lab report --previous): a cell whose safety verdict differs
    # from it is shown as unstable (lab/report/matrix.py). Empty: nothing to compare with.
    previous: tuple = ()
    previous_id: str = ""
    # What once_per_view functions computed from this view (the matrix's judged cells, its columns): each section
    # reads them, none recomputes them. Not copied by dataclasses.replace: a changed view computes its own.
    memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, trials: list[dict], meta: dict | None = None, run_id: str = "", charts: dict | None = None,
           previous: list[dict] | tuple = (), previous_id: str = "") -> RunView:
        meta = meta or {}
        return cls(trials_frame(trials, meta), meta, trials, run_id, {} if charts is None else charts,
                   tuple(previous), previous_id)


Section = Callable[[RunView], "str | None"]

T = TypeVar("T")


def once_per_view(compute: Callable[..., T]) -> Callable[..., T]:
    """A function of the run view (and of arguments that can key a dict) computed once per view and arguments, and
    kept in the view (RunView.memo): what several sections and the HTML page all read, the matrix's judged cells
    first, is judged once per render. What it returns is shared by every caller, so none may change it."""
    name = f"{compute.__module__}.{compute.__qualname__}"
    signature = inspect.signature(compute)

    @functools.wraps(compute)
    def cached(run: RunView, *args, **kwargs) -> T:
        bound = signature.bind(run, *args, **kwargs)
        bound.apply_defaults()  # f(run) and f(run, its default) are one computation
        key = (name, *list(bound.arguments.items())[1:])
        if key not in run.memo:
            run.memo[key] = compute(run, *args, **kwargs)
        return run.memo[key]

    return cached


MAIN = "REPORT.md"


@dataclass(frozen=True)
class Registered:
    order: float
    name: str
    render: Section
    file: str  # the file it is written to: REPORT.md, or an appendix beside it that REPORT.md links


_SECTIONS: dict[str, Registered] = {}


def section(order: float, file: str = MAIN) -> Callable[[Section], Section]:
    """Register a section at its place in the report (lower first); file: an appendix of its own, for a
    section too long for the page a reader decides from (every outcome, the timeline gallery)."""

    def register(render: Section) -> Section:
        name = f"{render.__module__}.{render.__name__}"
        _SECTIONS[name] = Registered(order, name, render, file)
        return render

    return register


MeasuredSection = Callable[[RunView, pd.DataFrame], "str | None"]


def measured_section(order: float, kind: Measured, select: Callable[[pd.DataFrame, Measured], pd.DataFrame] = ok_trials,
                     file: str = MAIN) -> Callable[[MeasuredSection], Section]:
    """Register a section about the trials of one measured kind (by default the finished ones, common.ok_trials):
    it is called with the run and those trials, and a run without any has nothing to say (None) without calling
    it. What it registers, and returns, is a plain section of the run."""

    def register(render: MeasuredSection) -> Section:
        @functools.wraps(render, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
        def rendered(run: RunView) -> str | None:
            trials = select(run.frame, kind)
            return None if trials.empty else render(run, trials)

        return section(order, file)(rendered)

    return register


def registered() -> list[Registered]:
    """Every section of the lab.report package, in report order (importing the package's modules registers them)."""
    import lab.report as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
    return sorted(_SECTIONS.values(), key=lambda s: (s.order, s.name))


APPENDIX_LINKS_ORDER = 215  # where REPORT.md links its appendices: after the last section, before provenance


def render_files(view: RunView) -> dict[str, str]:
    """file name -> its text: REPORT.md and each appendix with something to say, sections in order; REPORT.md
    links each appendix written at APPENDIX_LINKS_ORDER."""
    rendered = [(s.order, s.file, text) for s in registered() if (text := s.render(view)) is not None]
    appendices = list(dict.fromkeys(file for _, file, _ in rendered if file != MAIN))
    if appendices:
        links = "\n".join(f"- [{APPENDIX_TITLES.get(name, name)}]({name})" for name in appendices)
        text = f"## Appendices\n\nIn files of their own beside this one:\n\n{links}\n"
        rendered.append((APPENDIX_LINKS_ORDER, MAIN, text))
    parts: dict[str, list[str]] = {MAIN: []}
    for _, file, text in sorted(rendered, key=lambda r: r[0]):  # stable: registration order breaks ties
        parts.setdefault(file, []).append(text.rstrip() + "\n")
    return {name: "\n".join(texts) for name, texts in parts.items()}


OUTCOMES, TIMELINES, WHYNOT = "REPORT-outcomes.md", "REPORT-timelines.md", "REPORT-whynot.md"
MATRIX = "REPORT-matrix.md"
APPENDIX_TITLES = {WHYNOT: "why not just...?: every figure behind each row of the table",
                   MATRIX: "every backend under every fault: the matrix's own cells, a table per family of faults",
                   OUTCOMES: "every outcome of this run, one row per scenario, backend and variant",
                   TIMELINES: "the timeline of every failure: one picture per failing cell and counterexample"}
