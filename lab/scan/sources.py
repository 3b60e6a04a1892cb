"""Which Python files a scan reads, and where an imported module's source is, without importing anything.

The scanner follows a call into the module that defines it: one of the scanned files, a module beside them (the
package root above a scanned file is searched first), or an installed one on this interpreter's path. The standard
library is never read (its calls are modelled or opaque). A file that cannot be read or parsed is a warning, never a
crash; a path that does not exist is the user's error (one line, exit 2).
"""

from __future__ import annotations

import ast
import sys
import sysconfig
import warnings
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from lab.errors import LabError

SKIPPED_DIRS = {"__pycache__", "node_modules"}
# Importing one of these puts a PostgreSQL session (or a plugin that may open one) within the code's reach.
POSTGRES_EXTRAS = ("postgresql", "postgres", "pg", "psycopg", "psycopg2", "asyncpg")
REACHING = frozenset({"psycopg2", "psycopg", "psycopg_pool", "asyncpg", "sqlalchemy", "django", "pg8000",
                      "stevedore"})
# A library is followed only if it may talk to PostgreSQL: it asks for one of these (in any extra).
DATABASE_CLIENTS = frozenset({"psycopg2", "psycopg2-binary", "psycopg", "psycopg-binary", "asyncpg", "sqlalchemy",
                              "django", "pg8000"})


@dataclass(frozen=True)
class Parsed:
    path: str
    module: str  # dotted name
    tree: ast.Module | None
    error: str | None = None  # why it could not be read or parsed


def python_files(paths: list[str]) -> list[Path]:
    """Every .py file under the given files and folders (hidden folders, virtual environments and caches below a
    given folder skipped); LabError naming the first path that does not exist."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise LabError(f"scan: no such file or folder: {given}")
        if path.is_file():
            found.append(path)
            continue
        for candidate in sorted(path.rglob("*.py")):
            parts = candidate.relative_to(path).parts[:-1]
            if any(p.startswith(".") or p in SKIPPED_DIRS for p in parts):
                continue
            if any((path.joinpath(*parts[:i + 1]) / "pyvenv.cfg").exists() for i in range(len(parts))):
                continue
            found.append(candidate)
    return list(dict.fromkeys(p.resolve() for p in found))


def package_root(path: Path) -> tuple[Path, str]:
    """The folder a file's package hangs from, and its dotted module name (folders up while __init__.py is there)."""
    parts = [path.stem] if path.name != "__init__.py" else []
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return folder, ".".join(parts) or path.stem


@lru_cache(maxsize=1)
def _stdlib_dirs() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    return tuple(Path(paths[k]).resolve() for k in ("stdlib", "platstdlib") if k in paths)


def _is_site(path: Path) -> bool:
    return any(part in ("site-packages", "dist-packages") for part in path.parts)


def is_stdlib(path: Path) -> bool:
    resolved = path.resolve()
    return not _is_site(resolved) and any(resolved.is_relative_to(d) for d in _stdlib_dirs())


@lru_cache(maxsize=1)
def _distributions() -> dict[str, str]:
    """Top-level import name -> the installed distribution that provides it."""
    return {top: names[0] for top, names in metadata.packages_distributions().items() if names}


def distribution_of(path: str) -> str | None:
    """The installed distribution a file belongs to (django-pglock for .../site-packages/pglock/core.py), or None for a
    file that is not installed code."""
    resolved = Path(path).resolve()
    parts = resolved.parts
    for i, part in enumerate(parts):
        if part in ("site-packages", "dist-packages") and i + 1 < len(parts):
            top = parts[i + 1].removesuffix(".py")
            return _distributions().get(top, top)
    return None


@lru_cache(maxsize=None)
def talks_to_postgres(distribution: str) -> bool:
    """Whether an installed distribution asks for a PostgreSQL client, SQLAlchemy or Django: as a requirement, or in
    an extra named for PostgreSQL (tooz's `postgresql`; celery's `sqlalchemy` result backend does not count)."""
    if distribution.lower() in DATABASE_CLIENTS:
        return True
    try:
        required = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError:
        return True  # not a distribution the metadata knows: read it rather than guess
    for line in required:
        marker = line.split(";", 1)[1] if ";" in line else ""
        if "extra ==" in marker and not any(f"'{e}'" in marker or f'"{e}"' in marker for e in POSTGRES_EXTRAS):
            continue
        name = line.split(";")[0].strip()
        for stop in "<>=!~[( ":
            name = name.split(stop)[0]
        if name.lower().replace("_", "-") in DATABASE_CLIENTS:
            return True
    return False


class Sources:
    """Parsed modules by path and by name, for the scanned files and whatever they import."""

    def __init__(self, roots: list[Path]):
        self.roots = list(dict.fromkeys(r.resolve() for r in roots))
        self._by_path: dict[str, Parsed] = {}
        self._by_name: dict[str, str | None] = {}
        self.scanned: set[str] = set()  # the files the scan was given: results are reported at lines in these
        self.facts: dict[tuple, object] = {}  # what was once worked out of a module's source, kept for the scan

    def followed(self, path: Path, importer: str) -> bool:
        """Whether the interpreter reads a module's code: the scanned files and the project around them always; an
        installed library if it may talk to PostgreSQL, or if such a library imports it (tooz parses its URL with
        oslo.utils; what oslo.utils imports in turn stays opaque). A library that asks for no PostgreSQL client (a
        Redis or ZooKeeper client), imported from anywhere else, is left opaque."""
        if str(path.resolve()) in self.scanned:
            return True
        dist = distribution_of(str(path))
        if dist is None or talks_to_postgres(dist):
            return True
        importing = distribution_of(importer)
        return importing is not None and talks_to_postgres(importing)

    def add_root(self, root: Path) -> None:
        if root.resolve() not in self.roots:
            self.roots.insert(0, root.resolve())

    def parse(self, path: Path, module: str | None = None) -> Parsed:
        key = str(path.resolve())
        if key not in self._by_path:
            name = module or package_root(path)[1]
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                self._by_path[key] = Parsed(key, name, None, f"cannot read it: {exc}")
            else:
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", SyntaxWarning)
                        tree = ast.parse(text, key)
                    self._by_path[key] = Parsed(key, name, tree)
                except (SyntaxError, ValueError) as exc:
                    line = getattr(exc, "lineno", None)
                    self._by_path[key] = Parsed(key, name, None,
                                                f"not Python this interpreter parses ({type(exc).__name__}"
                                                f"{f' at line {line}' if line else ''}): skipped")
        return self._by_path[key]

    def reaches_postgres(self, parsed: Parsed) -> bool:
        """Whether a module can take a lock at all: it, or a module it imports that the scanner would follow, imports
        a PostgreSQL client (or a plugin loader), or one of its string constants names a lock function. A module that
        cannot is not interpreted: nothing in it can reach a PostgreSQL session."""
        found = self.facts.get(("reaches", parsed.module))
        if found is None:
            self.facts[("reaches", parsed.module)] = False  # an import cycle: what it imports decides
            found = self.facts[("reaches", parsed.module)] = self._reaches(parsed)
        return bool(found)

    def _reaches(self, parsed: Parsed) -> bool:
        from lab.scan import sql

        if parsed.tree is None:
            return False
        imported: list[str] = []
        for node in ast.walk(parsed.tree):
            if isinstance(node, ast.Import):
                imported += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = resolve_relative(parsed.module, parsed.path.endswith("__init__.py"), node.level, node.module) \
                    if node.level else (node.module or "")
                imported += [base] + [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "(" in node.value:
                if sql.facts((node.value,)).touches_locks:
                    return True
        if any(name.split(".")[0] in REACHING for name in imported):
            return True
        for name in dict.fromkeys(imported):
            path = self.find(name)
            if path is None or not self.followed(path, parsed.path):
                continue
            if self.reaches_postgres(self.parse(path, name)):
                return True
        return False

    def find(self, module: str) -> Path | None:
        """The source of a module by its dotted name: under the scanned roots first, then this interpreter's path.
        None for a module with no Python source (not installed, a compiled extension, or the standard library)."""
        if module not in self._by_name:
            self._by_name[module] = self._search(module)
        found = self._by_name[module]
        return Path(found) if found else None

    def _search(self, module: str) -> str | None:
        parts = module.split(".")
        for base in [*self.roots, *(Path(p) for p in sys.path if p)]:
            for candidate in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
                if candidate.is_file():
                    return None if is_stdlib(candidate) else str(candidate.resolve())
        return None


def resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of `from {'.' * level}{name} import ...` written in `module`."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - level + 1] if level else base
    return ".".join([*base, *([name] if name else [])])
