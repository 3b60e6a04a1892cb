"""One session ended by an administrator's call, as a crash, a kill or a failover would end it: pg_terminate_backend
on PostgreSQL, KILL CONNECTION on MariaDB (whichever server the monitor engine is on: lab/servers/sessions.py).

Confirmed when the server accepted the call and its session list (pg_stat_activity, the processlist) no longer
shows the session.
"""

from __future__ import annotations

import threading
import time

from sqlalchemy.engine import Engine

from lab.faults.base import FaultNotConfirmed
from lab.servers import sessions


def terminate_confirmed(monitor: Engine, pid: int | None, within: float = 5.0) -> dict:
    """End session pid and prove it ended; FaultNotConfirmed when there is no session or it stays."""
    if pid is None:
        raise FaultNotConfirmed("terminate had no session to end")
    call = sessions.terminate_call(monitor)
    if not sessions.terminate(monitor, pid):
        raise FaultNotConfirmed(f"{call} {pid}: no such session")
    gone_after = sessions.wait_gone(monitor, pid, within=within)
    if gone_after is None:
        raise FaultNotConfirmed(f"session {pid} was still listed by the server {within:g} s after its termination")
    return {"fault": "terminate", "call": call, "pid": pid, "gone_after_s": round(gone_after, 3)}


class TerminateSession:
    """One session terminated (pg_terminate_backend, KILL CONNECTION) at a set time after t0, from a timer thread."""

    def __init__(self, monitor: Engine, pid: int | None, at: float, t0: float):
        """pid None: the backend has no lock session, which confirm() reports as not terminated."""
        self.monitor, self.pid, self.at, self.t0 = monitor, pid, at, t0
        self.fired_at: float | None = None
        self.terminated = False
        self._timer = threading.Timer(max(0.0, t0 + at - time.monotonic()), self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        fired = time.monotonic() - self.t0
        self.terminated = self.pid is not None and sessions.terminate(self.monitor, self.pid)
        self.fired_at = fired

    def confirm(self) -> dict:
        """Evidence that it struck, read once the trial's timing is done (so proving it costs the
        trial nothing); FaultNotConfirmed when it did not fire or the session is still there."""
        self._timer.join(max(0.0, self.t0 + self.at - time.monotonic()) + 10)
        if self.fired_at is None:
            raise FaultNotConfirmed("the termination never fired")
        call = sessions.terminate_call(self.monitor)
        if not self.terminated:
            raise FaultNotConfirmed(f"{call} {self.pid}: no such session")
        if sessions.wait_gone(self.monitor, self.pid, within=5.0) is None:
            raise FaultNotConfirmed(f"session {self.pid} was still listed by the server after its termination")
        return {"fault": "terminate", "call": call, "pid": self.pid, "fired_at": round(self.fired_at, 4)}

    def __enter__(self) -> "TerminateSession":
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        # Heal: a fault that has not fired by the end of its trial never fires.
        self._timer.cancel()
