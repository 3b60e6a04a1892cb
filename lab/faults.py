"""Faults: what the world does to a run's sessions, each one undone at the end of its trial.

A setting fault is applied to the lock's own session at connect time (the post's
holder sets its own timeout), so it ends with that session and needs no heal.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from lab import pg


@dataclass(frozen=True)
class SessionTimeout:
    """A server timeout set on the lock's session: idle_in_transaction_session_timeout or idle_session_timeout."""

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


def idle_in_transaction_timeout(seconds: float) -> SessionTimeout:
    return SessionTimeout("idle_in_transaction_session_timeout", seconds)


def idle_session_timeout(seconds: float) -> SessionTimeout:
    # idle_session_timeout arrived in PostgreSQL 14.
    return SessionTimeout("idle_session_timeout", seconds, min_server_version=140000)


class TerminateSession:
    """pg_terminate_backend on one session at a set time after t0, from a timer thread."""

    def __init__(self, monitor: Engine, pid: int, at: float, t0: float):
        self.monitor, self.pid, self.at, self.t0 = monitor, pid, at, t0
        self.fired_at: float | None = None
        self._timer = threading.Timer(max(0.0, t0 + at - time.monotonic()), self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        pg.terminate(self.monitor, self.pid)
        self.fired_at = time.monotonic() - self.t0

    def __enter__(self) -> "TerminateSession":
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        # Heal: a fault that has not fired by the end of its trial never fires.
        self._timer.cancel()
