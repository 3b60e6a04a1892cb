"""Whether Patroni can run here, and the Python command that runs it as the PostgreSQL server's user.

Patroni starts postgres itself, so it must run as the user the lab's PostgreSQL runs as
(`embedded_postgres` when the lab is root: PostgreSQL refuses root). That user must be able to run a
Python interpreter and read the packages the lab installed. A venv made from a pyenv Python under
root's home (mode 0700) fails the first: the venv's `python` is a symlink into /root. So the lab
looks for an interpreter of the same major.minor version that the user can run (the venv's own,
its base, then the system's /usr/bin/pythonX.Y), runs it isolated (-I -S: no user site, no
/usr/lib/python3/dist-packages) with the lab's site-packages added, and checks, as that user, that
Patroni and psycopg2 import. Where that user cannot enter the lab's site-packages (a venv under /root),
the distributions Patroni needs (itself, its declared requirements for etcd, psycopg2: about 24 MB) are
copied once into a temp dir of the lab's it can read, as the embedded PostgreSQL's binaries are.
What fails is said in one line naming the fix.
"""

from __future__ import annotations

import atexit
import functools
import importlib.metadata
import importlib.util
import os
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

from lab.servers.postgres.server import POSTGRES_OS_USER, _ensure_os_user, traversable_by_others
from lab.servers.services import owned_temp_dir

MISSING = "patroni not installed (pip install -e '.[ha]')"
VENV_FIX = ("make the lab's venv from /usr/bin/python3, e.g. python3 -m venv /opt/locklab-venv")
# What Patroni needs of the lab's packages: itself with its etcd extra, and the driver it loads by name.
NEEDED: tuple[tuple[str, frozenset[str]], ...] = (("patroni", frozenset({"etcd3"})), ("psycopg2-binary", frozenset()), ("psycopg2", frozenset()))

# Run as `python -I -S -c BOOT SITE_DIR... CONFIG`: the site dirs (with their .pth files), then Patroni's main.
BOOT = ("import site, sys; [site.addsitedir(d) for d in sys.argv[1:-1]]; sys.argv = ['patroni', sys.argv[-1]]; "
        "from patroni.__main__ import main; main()")
_CHECK = ("import site, sys; [site.addsitedir(d) for d in sys.argv[1:]]; import patroni.version, psycopg2, yaml; "
          "print('%d.%d' % sys.version_info[:2], patroni.version.__version__)")


def installed() -> bool:
    """Patroni's code is importable here (an empty folder of that name, a namespace package, is not an install)."""
    try:
        spec = importlib.util.find_spec("patroni")
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None


def version() -> str | None:
    try:
        return importlib.metadata.version("patroni")
    except importlib.metadata.PackageNotFoundError:
        return None


class Unavailable(Exception):
    """Patroni cannot run here; str() is the one line saying why and what to do."""


@dataclass(frozen=True)
class PatroniRuntime:
    """An interpreter the server user can run, and the site dirs that hold Patroni and its dependencies."""

    python: str
    site_dirs: tuple[str, ...]
    user: str | None
    version: str

    def argv(self, config: Path) -> list[str]:
        return [self.python, "-I", "-S", "-c", BOOT, *self.site_dirs, str(config)]


def _site_dirs() -> tuple[str, ...]:
    """The lab's site-packages, and wherever Patroni itself was found (a user site, say)."""
    dirs = [d for d in site.getsitepackages() if Path(d).is_dir()]
    spec = importlib.util.find_spec("patroni")
    if spec is not None and spec.origin is not None:
        home = str(Path(spec.origin).parent.parent)
        if home not in dirs:
            dirs.append(home)
    return tuple(dirs)


def _candidates() -> list[str]:
    """Interpreters that may be this one's version, best first: the lab's own, its base, the system's."""
    tag = f"python{sys.version_info.major}.{sys.version_info.minor}"
    found = [sys.executable, os.path.realpath(sys.executable),
             os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
             f"/usr/bin/{tag}", f"/usr/local/bin/{tag}", shutil.which(tag) or ""]
    return list(dict.fromkeys(p for p in found if p and os.path.isfile(p)))


@functools.lru_cache(maxsize=None)
def runtime() -> PatroniRuntime:
    """The Python command that runs Patroni as the server's user; Unavailable with the reason and the fix."""
    if not installed():
        raise Unavailable(MISSING)
    user = POSTGRES_OS_USER if os.geteuid() == 0 else None
    dirs = _site_dirs()
    if user is not None:
        _ensure_os_user(user)
        if not all(traversable_by_others(Path(d)) for d in dirs):
            dirs = (str(_readable_copy()),)
    want = f"{sys.version_info.major}.{sys.version_info.minor}"
    tried = []
    for python in _candidates():
        try:
            result = subprocess.run([python, "-I", "-S", "-c", _CHECK, *dirs], capture_output=True, text=True,
                                    user=user, timeout=60)
        except (OSError, subprocess.TimeoutExpired):  # the user may not even execute it
            tried.append(python)
            continue
        said = result.stdout.split()
        if result.returncode == 0 and said[:1] == [want]:
            return PatroniRuntime(python, dirs, user, said[1])
        tried.append(python)
    who = f"{user}, the server's user," if user else "this user"
    raise Unavailable(f"no Python {want} that {who} can run imports Patroni (tried {', '.join(tried)}): {VENV_FIX}")


def _distributions() -> list[importlib.metadata.Distribution]:
    """Patroni's distribution and every one it requires here (its etcd extra; markers as this Python reads them)."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(NEEDED)
    while todo:
        name, extras = todo.pop()
        key = name.lower().replace("_", "-")
        if key in found:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an optional one (psycopg2 or psycopg2-binary): the import check below decides
        found[key] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras or {""}):
                todo.append((req.name, frozenset(req.extras)))
    return list(found.values())


def _readable_copy() -> Path:
    """The distributions Patroni needs, copied into a temp dir of this process's (removed at exit, or by the next
    run's sweep after a SIGKILL) that the server's user can read."""
    folder = owned_temp_dir()
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    target = folder / "site-packages"
    for dist in _distributions():
        for file in dist.files or []:
            source = Path(str(dist.locate_file(file)))
            if source.is_file() and ".." not in file.parts:  # a console script lives outside site-packages
                destination = target / file
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, destination)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644 | (path.stat().st_mode & 0o111))
    return target


def unavailable_reason() -> str | None:
    """None when Patroni can run here, else the one line a cell's *does not run* gives."""
    try:
        runtime()
    except Unavailable as exc:
        return str(exc)
    return None
