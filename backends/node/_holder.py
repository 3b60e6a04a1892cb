"""What every Node.js holder program declares: node runs its holder.js, npm ci installs its packages.

A Node.js lock is a folder here with holder.js (it speaks the holder protocol with protocol.js beside
this file), package.json and package-lock.json, and a subclass of NodeHolder naming that folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from backends.external import ExternalLock

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent  # the checkout: the install line is given from there, as README gives it
# The lab's line for a missing node, the one .ci/os-packages gives (tests/fast/test_os_packages.py checks it).
MISSING_NODE = "nodejs not installed (apt-get install nodejs)"


class NodeHolder(ExternalLock):
    """A lock held by holder.js in `folder` (`HERE / "<name>"`, a folder beside this module), run by node."""

    language = "Node.js"
    command = ("node", "holder.js")

    @classmethod
    def install_line(cls) -> str:
        return f"npm ci --prefix {cls.folder.relative_to(ROOT)}"

    @classmethod
    def _package(cls) -> Path:
        return cls.folder / "node_modules" / cls.library / "package.json"

    @classmethod
    def missing(cls) -> str | None:
        if super().missing() is not None:
            return MISSING_NODE
        if not cls._package().is_file():
            return f"{cls.library} not installed in {cls.folder.relative_to(ROOT)} ({cls.install_line()})"
        return None

    @classmethod
    def library_version(cls) -> str | None:
        """The version npm installed, from its package.json in node_modules."""
        try:
            return str(json.loads(cls._package().read_text())["version"])
        except (OSError, ValueError, KeyError):
            return None
