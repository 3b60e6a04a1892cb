"""docs/reference.md, rendered from what the code declares: backends, scenarios, fault columns, capabilities, drivers.

`lab list --markdown` prints it and tests/fast/test_reference_page.py holds the committed page to it, so the
page cannot drift from the declarations. It is the same on every machine: every built-in backend and every
adapter the registry declares is listed whether or not its library is installed here (an adapter whose
library is missing is read through empty stand-ins for that library's modules, dropped again afterwards),
a library's version is the one the project pins (pyproject.toml, or a Node.js holder's package-lock.json),
never the one installed, and nothing says what this machine has.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import re
import sys
import tomllib
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import backends
import scenarios
from lab.declarations.capabilities import Capability
from lab.declarations.columns import Column
from lab.declarations.registry import import_entry
from lab.servers.postgres import drivers

CHECKOUT = Path(__file__).resolve().parents[1]
REGENERATE = "lab list --markdown > docs/reference.md"


@dataclass(frozen=True)
class BackendRow:
    """What one registered backend declares, as plain words."""

    name: str
    summary: str
    capabilities: tuple[str, ...]
    where: str  # Where.describe(): its lock, its fence, its writes
    library: str  # "" for the lab's own strategies; else the library, its language's registry and pinned version
    listed: str  # when `lab list` shows it


class _StandIn(types.ModuleType):
    """A missing library's module, there only so an adapter's module can be read for its declarations:
    each name taken from it is an empty class (a base class, an exception, a function: none is ever called)."""

    __path__: list[str] = []  # a package, so that its submodules stand in too

    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        stand_in = type(name, (), {"__module__": self.__name__})
        setattr(self, name, stand_in)
        return stand_in


def _under(name: str, modules: set[str]) -> bool:
    """Whether a module is one of `modules` or inside one of them."""
    return any(name == m or name.startswith(m + ".") for m in modules)


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a stand-in for each of the given modules and anything inside them, and for nothing else."""

    def __init__(self, modules: set[str]):
        self.modules = modules

    def find_spec(self, fullname, path=None, target=None):
        if _under(fullname, self.modules):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StandIn(spec.name)

    def exec_module(self, module) -> None:
        pass


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package, or a module set to None in sys.modules
        return False


@contextmanager
def _stand_ins(modules: set[str]) -> Iterator[None]:
    """Within: `modules` (and what is inside them) import as stand-ins. After: sys.modules holds no stand-in and no
    module of `backends` imported within (each was built on stand-ins), and every entry it held before is back."""
    saved = {name: module for name, module in sys.modules.items() if _under(name, modules)}
    before = set(sys.modules)
    for name in saved:
        del sys.modules[name]
    finder = _StandInFinder(modules)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if _under(n, modules) or (n not in before and n.startswith("backends."))]:
            del sys.modules[name]
        sys.modules.update(saved)


def _requirements() -> dict[str, str]:
    """Normalised distribution name -> its version specifier, from every requirement of the project."""
    pyproject = CHECKOUT / "pyproject.toml"
    if pyproject.is_file():
        project = tomllib.loads(pyproject.read_text())["project"]
        lines = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    else:  # an installed wheel: the same requirements, from its metadata
        lines = [r.split(";")[0] for r in metadata.requires("locklab") or []]
    found = {}
    for line in lines:
        match = re.match(r"\s*([A-Za-z0-9._-]+)\s*(?:\[[^\]]*\])?\s*([^;]*)", line)
        if match:
            found[_normalised(match.group(1))] = match.group(2).strip()
    return found


def _normalised(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _library(cls: Any, requirements: dict[str, str]) -> str:
    """'`tooz` >=6 (PyPI)', '`redlock` 4.2.0 (npm, package-lock.json)', or '' for the lab's own strategies."""
    if not cls.library:
        return ""
    lockfile = getattr(cls, "folder", None)
    if lockfile is not None and (Path(lockfile) / "package-lock.json").is_file():
        packages = json.loads((Path(lockfile) / "package-lock.json").read_text())["packages"]
        version = packages.get(f"node_modules/{cls.library}", {}).get("version", "?")
        return f"`{cls.library}` {version} (npm, {cls.language}, package-lock.json)"
    pinned = requirements.get(_normalised(cls.library))
    return f"`{cls.library}` {pinned} (PyPI)" if pinned else f"`{cls.library}` (PyPI)"


def _row(cls: Any, listed: str, requirements: dict[str, str]) -> BackendRow:
    ordered = tuple(c.value for c in Capability if c in cls.capabilities)
    return BackendRow(cls.name, cls.summary, ordered, cls.where().describe(), _library(cls, requirements), listed)


def backend_rows() -> list[BackendRow]:
    """Every built-in backend and every declared adapter, in registry order, installed here or not.

    Plugins (entry points, --backend-module) are not the lab's declarations and are left out."""
    requirements = _requirements()
    rows = {name: _row(import_entry(entry), "always", requirements) for name, entry in backends.BUILTIN.items()}
    absent: dict[str, tuple[str, list[str]]] = {}
    for name, (entry, *needs) in backends.ADAPTERS.items():
        listed = (f"when `{'` and `'.join(needs)}` import{'' if len(needs) > 1 else 's'}" if needs
                  else "always; without its runtime or packages its cells say *does not run*")
        missing = [module for module in needs if not _installed(module)]
        if missing:
            absent[name] = (entry, missing)
        else:
            rows[name] = _row(import_entry(entry), listed, requirements)
        rows.setdefault(name, BackendRow(name, "", (), "", "", listed))  # holds its place in registry order
    if absent:
        with _stand_ins({module for _, missing in absent.values() for module in missing}):
            for name, (entry, _) in absent.items():
                rows[name] = _row(import_entry(entry), rows[name].listed, requirements)
    return list(rows.values())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows), ""]


def _strikes(column: Column) -> str:
    """The services a column's fault strikes, and the kinds of right it bears on or spares: 'redis; only a lock with
    replica_ack'."""
    said = ", ".join(column.strikes) if column.strikes else "the lock's own services"
    if column.needs:
        said += f"; only a lock with {' or '.join(f'`{c}`' for c in column.needs)}"
    if column.spared_by:
        said += f"; never one with {' or '.join(f'`{c}`' for c in column.spared_by)}"
    return said


def _happens_when(column: Column) -> str:
    """'a transaction-pooling PgBouncer (or alike) in front', 'any stack', or 'not declared'."""
    if column.happens_when is None:
        return "not declared"
    return "; ".join(c.words() for c in column.happens_when) or "any stack"


def render() -> str:
    """The whole page, Markdown, ending in one newline."""
    lines = [
        "# Reference: what the code declares",
        "",
        f"Generated by `{REGENERATE}` from the declarations in `backends/`, `scenarios/` and",
        "`lab/declarations/capabilities.py`; do not edit it by hand. `tests/fast/test_reference_page.py` fails when it differs",
        "from the code. It lists every built-in backend and every adapter the registry declares, whether or not",
        "its library is installed where the page was made; plugins (entry points, `--backend-module`) are not the",
        "lab's and are not here. A library's version is the one the project asks for (pyproject.toml, or the",
        "holder's package-lock.json); a run records the version it used in its meta.json.",
        "",
        "## Backends",
        "",
        "In `lab list` order, which is the order of the report's rows. *Where* says which server holds the lock,",
        "checks its fence and takes its writes: a fault applies to a backend when it strikes any of them.",
        "",
    ]
    lines += _table(["backend", "what it is", "capabilities", "where", "library", "listed"],
                    [[f"`{r.name}`", r.summary, ", ".join(r.capabilities), r.where, r.library, r.listed]
                     for r in backend_rows()])
    lines += ["## Scenarios", "",
              "In the order a run executes them. *Default*: run by `lab run` without `--scenario`. *Lane*: what may",
              "run beside it (shared: the run's servers, in two lanes where none reaches the others' servers; own",
              "servers: servers each trial starts, beside the shared ones; alone: nothing beside it, because it times",
              "things).", ""]
    lines += _table(["scenario", "what it does", "default", "lane"],
                    [[f"`{name}`", cls.summary, "yes" if cls.default_run else "", cls.pacing.lane.value]
                     for name in scenarios.names() for cls in [scenarios.load(name)]])
    lines += ["## Fault columns", "",
              "The columns of the report's matrix, in its order: each is one variant of a scenario, with its",
              "heading and its legend (what the fault does, and what confirms that it struck). *Happens when*: the",
              "stack traits under which its fault can happen at all, each counted for a lock only where that trait's",
              "service holds its lock, fence or writes; *strikes*: the services it can reach (`lab doctor --advise`",
              "and `lab report --stack` read both; lab/stack/exposure.py), and the kinds of right it bears on, as the",
              "capabilities a lock declares: a lock it reaches by neither is n/a there, and only that (a fault the lab",
              "cannot make for a lock it would reach is *not run*).", ""]
    columns = sorted(((f.scenario, c) for f in scenarios.fault_columns() for c in f.columns),
                     key=lambda found: (found[1].order, found[0]))
    lines += _table(["scenario", "variant", "label", "legend", "happens when", "strikes"],
                    [[f"`{scenario}`", f"`{c.variant}`", c.label, c.legend, _happens_when(c),
                      _strikes(c)] for scenario, c in columns])
    lines += ["## Capabilities", "",
              "What a backend may declare (`lab/declarations/capabilities.py`); a scenario selects the backends it applies to by",
              "these alone.", ""]
    lines += _table(["capability", "what it promises"], [[f"`{c.value}`", c.__doc__ or ""] for c in Capability])
    lines += ["## Drivers", "",
              "How a session lock's PostgreSQL connection is made (`lab run --driver`; `pip install -e '.[drivers]'`).",
              ""]
    lines += _table(["driver", "what it is", "needs"],
                    [[f"`{name}`", what, ", ".join(f"`{m}`" for m in needs)]
                     for name, (needs, what) in drivers.DRIVERS.items()])
    return "\n".join(lines).rstrip("\n") + "\n"
