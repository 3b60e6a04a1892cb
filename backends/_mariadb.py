"""What every MariaDB lock shares: where it lives, and why it cannot run against servers without a MariaDB.

A MariaDB lock keeps its company rows on the same MariaDB (a lock on one server guarding writes on another
would be two lab questions at once): its lock, its writes and its services are MariaDB, so every fault that
strikes MariaDB reaches it and none that strikes only PostgreSQL does (lab/declarations/where.py).
"""

from __future__ import annotations

import importlib.util

from backends.base import Backend
from lab.servers.mariadb.server import NO_DRIVER
from lab.servers.services import Services


class OnMariaDB(Backend):
    """Mixin base of the MariaDB locks: its declarations and its cannot_run()."""

    services = ("mariadb",)
    lock_service = "mariadb"
    writes_to = "mariadb"

    @classmethod
    def cannot_run(cls, services: Services) -> str | None:
        if importlib.util.find_spec("pymysql") is None:
            return NO_DRIVER
        if services.mariadb_url is None:
            return services.unavailable.get("mariadb") or "no MariaDB among this run's servers"
        return None
