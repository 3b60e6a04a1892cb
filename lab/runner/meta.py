"""meta.json changed one thread at a time: lanes finish scenarios (and settle cells) on threads of their own, and
each change reads meta.json, changes it and writes it whole."""

from __future__ import annotations

import threading
from collections.abc import Callable

from lab.records.results import RunFolder

META_LOCK = threading.Lock()


def change_meta(folder: RunFolder, change: Callable[[dict], None]) -> None:
    """Read the run's meta.json, let `change` edit it in place, write it back, with no other change between."""
    with META_LOCK:
        meta = folder.meta()
        change(meta)
        folder.write_meta(meta)
