"""The optional operating-system packages of .ci/os-packages: which are installed here, and the one line
a test that needs a missing one skips with.

The one list is .ci/os-packages: .ci/run installs from it, docs/os-packages.md's table is checked against it
(tests/fast/test_os_packages.py), and every test that needs a package goes through this module, by the
marker `pytest.mark.os_packages("pgbouncer")` (tests/conftest.py) or by require() in a fixture. Where
.ci/run sets LAB_REQUIRE_SYSTEM_SERVERS=1 a missing package fails the test instead of skipping it.
"""

from __future__ import annotations

import functools
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab.servers.fake_clock import is_elf

LIST = Path(__file__).resolve().parents[1] / ".ci" / "os-packages"
SEARCH_AFTER_PATH = "/usr/sbin"  # where Debian puts pgbouncer and tc, outside an unprivileged user's PATH
REQUIRED = "LAB_REQUIRE_SYSTEM_SERVERS"  # set by .ci/run: there every package is installed


@dataclass(frozen=True)
class OsPackage:
    name: str
    binaries: tuple[str, ...]  # absolute paths, or names looked up on PATH then /usr/sbin
    enables: str

    def installed(self) -> bool:
        """Whether every binary that shows this package is there and executable."""
        return all(_executable(binary) for binary in self.binaries)

    @property
    def binary(self) -> str:
        """Its first binary: the path a test starts, when the list names it by path."""
        return self.binaries[0]


def _executable(binary: str) -> bool:
    """Whether binary (a path, or a name on PATH then /usr/sbin) is an executable file, as the lab finds it; a shared
    library (libfaketime's, which a process preloads and nobody executes) by its file alone."""
    if os.path.isabs(binary):
        library = ".so" in os.path.basename(binary)
        if library:  # as the lab finds it (lab/servers/fake_clock.py): a whole ELF file, not merely a path
            return is_elf(Path(binary))
        return os.path.isfile(binary) and os.access(binary, os.X_OK)
    search = os.pathsep.join(p for p in (os.environ.get("PATH", ""), SEARCH_AFTER_PATH) if p)
    return shutil.which(binary, path=search) is not None


@functools.cache
def packages() -> dict[str, OsPackage]:
    """The list, in its order: `package  binary,binary  # what it enables`, one a line, # for comments."""
    found = {}
    for line in LIST.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields, _, enables = line.partition("#")
        name, binaries = fields.split()
        found[name] = OsPackage(name, tuple(binaries.split(",")), enables.strip())
    return found


def install_command(names=None) -> str:
    """The one command that installs these packages (by default all of them)."""
    return "apt-get install " + " ".join(names if names is not None else packages())


def not_installed(name: str) -> str:
    """The one line the lab and the tests say for a missing package: what is missing and how to install it."""
    return f"{name} not installed ({install_command([name])})"


def missing(*names: str, hidden=()) -> list[str]:
    """Which of these packages (by default all) are not installed here, or are hidden from the lab by the test."""
    for name in names:
        if name not in packages():
            raise KeyError(f"{name} is not in {LIST}")
    return [n for n in names or packages() if n in hidden or not packages()[n].installed()]


def missing_line(*names: str, root: bool = False) -> str | None:
    """One line for everything among these packages (and root, when asked) that this machine lacks, or None."""
    absent = missing(*names)
    lines = []
    if absent:
        lines.append(f"{' and '.join(absent)} not installed ({install_command(absent)})")
    if root and os.geteuid() != 0:
        lines.append("needs root (the tests run as an unprivileged user)")
    return "; ".join(lines) or None


def require(*names: str, root: bool = False) -> None:
    """Skip the calling test with the one line naming what is missing and its install command.

    Under LAB_REQUIRE_SYSTEM_SERVERS (.ci/run, which installs them all) the test fails instead, so a
    package that stopped installing cannot turn the tier into skips unnoticed."""
    skip_for(missing_line(*names, root=root))


def skip_for(line: str | None) -> None:
    """Skip the calling test with line, what this machine lacks (nothing where line is None); under
    LAB_REQUIRE_SYSTEM_SERVERS fail it instead, as require() does."""
    if line is None:
        return
    if os.environ.get(REQUIRED):
        pytest.fail(f"{line}, and {REQUIRED} is set")
    pytest.skip(line)


def does_not_run(hidden=()) -> set[str]:
    """The reasons a cell may give here for not running: 'does not run: ' and the line of each missing or hidden
    package, netdrop's need of root when the tests are not root, and the patroni scenario's line when Patroni (the
    `ha` extra) cannot run here.

    Under LAB_REQUIRE_SYSTEM_SERVERS a package missing (not hidden) fails the test: there every one is installed."""
    from lab.servers.netns import unavailable_reason
    from lab.servers.patroni.runtime import unavailable_reason as patroni_unavailable

    absent = missing(hidden=hidden)
    really = [n for n in absent if n not in hidden]
    if really and os.environ.get(REQUIRED):
        pytest.fail(f"{' and '.join(really)} not installed ({install_command(really)}), and {REQUIRED} is set")
    reasons = {f"does not run: {not_installed(name)}" for name in absent}
    netdrop, patroni = unavailable_reason(), patroni_unavailable()
    return (reasons | ({f"does not run: {netdrop}"} if netdrop is not None else set())
            | ({f"does not run: {patroni}"} if patroni is not None else set()))
