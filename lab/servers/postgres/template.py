"""One freshly initialised PostgreSQL data directory per run and binaries, copied for each server a trial starts.

Why: initdb is most of a per-trial server's start-up (0.65-1.0 CPU-seconds of a failover pair's 1.1-1.6 s
here), and a run of every scenario starts about 130 such servers while other scenarios' trials want the
same two cores. A copy of an untouched initdb output is the same cluster (the same catalogs, settings and
superuser verifier); the one thing the copies share is the template's superuser password, which stays in
this process and in files only the server's user reads, as an initdb'd server's would.
"""

from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lab.errors import ServiceError

_made: dict[tuple[Path, Path], "DataTemplate"] = {}
_making = threading.Lock()


@dataclass(frozen=True)
class DataTemplate:
    """An initdb'd data directory (never started) and the superuser password its verifier was made from."""

    data: Path
    password: str

    def copy_to(self, data: Path) -> None:
        """A copy of the template at `data` (which must not exist yet), owner and modes kept."""
        # cp -a keeps the owner when run as root and the 0700 modes PostgreSQL insists on; one process, no
        # Python loop over some 1,000 files.
        result = subprocess.run(["cp", "-a", str(self.data), str(data)], capture_output=True, text=True,
                                timeout=120)
        if result.returncode != 0:
            raise ServiceError(f"copying the PostgreSQL data template failed: {result.stderr.strip()}")


def made_once(bin_dir: Path, tmp: Path, make: Callable[[str], DataTemplate]) -> DataTemplate:
    """The run's template for these binaries in its temp dir `tmp`, made by the first caller (others wait):
    make(name) initdb's one (lab/servers/postgres/server.py template_for), under a name of its own."""
    key = (bin_dir, tmp)
    with _making:
        made = _made.get(key)
        if made is None or not made.data.exists():
            made = _made[key] = make(f"pg-template-{len(_made)}")
        return made
