"""An idle guard set on the lock's session: PostgreSQL's idle_in_transaction_session_timeout or idle_session_timeout,
or one of MariaDB's: idle_transaction_timeout, idle_write_transaction_timeout, wait_timeout.

The setting travels with the session from its start (PostgreSQL's startup options, PyMySQL's init_command: the
post's holder sets its own timeout), so it ends with that session and needs no heal. It confirms from the
server's own log line where the lab can read the log (PostgreSQL's "terminating connection due to
idle-in-transaction timeout", MariaDB's "Aborted connection N ... (Got timeout reading communication packets)"),
else from the session's absence in the server's session list.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from lab.servers import sessions
from lab.servers.services import Services


@dataclass(frozen=True)
class SessionTimeout:
    setting: str
    seconds: float
    min_server_version: int = 90600
    service: str = "postgres"  # the server the setting is one of: postgres or mariadb

    def session_settings(self) -> dict:
        """The setting as its server takes it: PostgreSQL in milliseconds, MariaDB in whole seconds (rounded up)."""
        if self.service == "mariadb":
            return {self.setting: max(1, math.ceil(self.seconds))}
        return {self.setting: f"{int(round(self.seconds * 1000))}ms"}

    def unsupported_reason(self, server_version_num: int) -> str | None:
        """Why this PostgreSQL cannot apply the setting, or None when it can."""
        if self.service == "postgres" and server_version_num < self.min_server_version:
            return f"{self.setting} needs PostgreSQL {self.min_server_version // 10000}+"
        return None

    def struck(self, services: Services, monitor: Engine, pid: int | None) -> dict:
        """Evidence of whether the guard ended session pid: the server's log line, and the session's state (monitor:
        an engine on the guard's server)."""
        said = sessions.why_ended(services, monitor, pid) if pid is not None else None
        state = sessions.state(monitor, pid) if pid is not None else None
        listing = "processlist" if self.service == "mariadb" else "pg_stat_activity"
        return {"fault": self.setting, "server_said": said, "session": state,
                "struck": state == "gone", "confirmed_by": "server log" if said else listing}


def idle_in_transaction_timeout(seconds: float) -> SessionTimeout:
    return SessionTimeout("idle_in_transaction_session_timeout", seconds)


def idle_session_timeout(seconds: float) -> SessionTimeout:
    # idle_session_timeout arrived in PostgreSQL 14.
    return SessionTimeout("idle_session_timeout", seconds, min_server_version=140000)


def mariadb_guard(setting: str, seconds: float) -> SessionTimeout:
    """One of MariaDB's guards: idle_transaction_timeout (any transaction), idle_write_transaction_timeout (one that
    wrote), idle_readonly_transaction_timeout, or wait_timeout (any idle session, in a transaction or not)."""
    return SessionTimeout(setting, seconds, service="mariadb")
