"""Resuming a run: what its meta.json says was asked, and which of its trials are already done.

A step of its own that returns a new request instead of overwriting the caller's, so what the user
asked and what the run folder says stay two things anyone can compare.
"""

from __future__ import annotations

from dataclasses import replace

import backends
from lab.records.results import RunFolder
from lab.runner.plan import RunRequest
from lab.servers.postgres.drivers import DEFAULT as DEFAULT_DRIVER


def resumed(request: RunRequest, folder: RunFolder) -> tuple[RunRequest, frozenset[str]]:
    """The request as the run in `folder` was started (backends, scenarios, profile, drivers), and the ids of
    its trials that need not run again (every recorded one but the errors, which get another try).

    Registers the run's --backend-module plugins as it goes: the plan it returns names them."""
    meta = folder.meta()
    for spec in meta.get("backend_modules", []):
        backends.add_module(spec)
    done = frozenset(r["id"] for r in folder.trials() if r["status"] != "error")
    return replace(request, backends=meta["backends"], scenarios=meta["scenarios"], profile=meta["profile"],
                   drivers=meta.get("drivers") or [DEFAULT_DRIVER]), done
