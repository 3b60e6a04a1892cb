"""An idle guard set on the lock's session: idle_in_transaction_session_timeout or idle_session_timeout.

The setting travels in the session's startup options (the post's holder sets its own
timeout), so it ends with that session and needs no heal. It confirms from the server's
own log line ("terminating connection due to idle-in-transaction timeout") when the lab
can read the log, else from the session's absence in pg_stat_activity.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Engine

from lab.servers import pg
from lab.servers.services import Services


@dataclass(frozen=True)
class SessionTimeout:
    setting: str
    seconds: float
    min_server_version: int = 90600

    def session_settings(self) -> dict:
        return {self.setting: f"{int(round(self.seconds * 1000))}ms"}

    def unsupported_reason(self, server_version_num: int) -> str | None:
        """Why this server cannot apply the setting, or None when it can."""
        if server_version_num < self.min_server_version:
            return f"{self.setting} needs PostgreSQL {self.min_server_version // 10000}+"
        return None

    def struck(self, services: Services, monitor: Engine, pid: int | None) -> dict:
        """Evidence of whether the guard ended session pid: the server's log line, and the session's state."""
        said = pg.why_session_ended(services.pg_log, pid) if pid is not None else None
        state = pg.session_state(monitor, pid) if pid is not None else None
        return {"fault": self.setting, "server_said": said, "session": state,
                "struck": state == "gone", "confirmed_by": "server log" if said else "pg_stat_activity"}


def idle_in_transaction_timeout(seconds: float) -> SessionTimeout:
    return SessionTimeout("idle_in_transaction_session_timeout", seconds)


def idle_session_timeout(seconds: float) -> SessionTimeout:
    # idle_session_timeout arrived in PostgreSQL 14.
    return SessionTimeout("idle_session_timeout", seconds, min_server_version=140000)
