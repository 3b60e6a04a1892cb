"""The post's detector check: kill the holder at 2.00 s and time how soon a poller gets the lock."""

from __future__ import annotations

import time

from lab.declarations.capabilities import Capability
from lab.checkers import ops
from lab.checkers.judge import detection
from lab.checkers.ops import F, Recorder, Type
from lab.checkers.verdict import Verdict
from lab.declarations.columns import Column, FaultFamily
from lab.faults import TerminateSession
from lab.measures.kinds import Measured
from lab.declarations.pacing import Lane, Pacing
from lab.servers import sessions
from scenarios.base import Scenario, TrialEnv, judged


class Calibrate(Scenario):
    name = "calibrate"
    measured = Measured.CALIBRATION
    driver_axis = True  # the driver decides whether the lock connection sits in a transaction
    default_run = True
    pacing = Pacing(lane=Lane.ALONE)  # how soon a poller got in, timed: nothing beside it
    summary = "detector check: holder's session killed at 2.00 s, a second session polls every 50 ms"
    requires = frozenset({Capability.SESSION_LOCK})
    title = "the lock session killed"
    columns = (
        Column("terminate", "lock session killed", 4,
               "pg_terminate_backend (KILL CONNECTION on MariaDB) on the holder's lock session at 2 s while a second "
               "session polls; confirmed when the server accepts it and the session is gone from its session list",
               family=FaultFamily.DETECTOR, happens_when=(), strikes=("postgres", "mariadb")),
    )
    params = {
        "quick": {"kill_at": 2.0, "poll": 0.05, "give_up": 3.0, "trials": 5, "parallel": 15},
        "default": {"kill_at": 2.0, "poll": 0.05, "give_up": 3.0, "trials": 5, "parallel": 15},
    }

    def run_trial(self, env: TrialEnv) -> dict:
        p = env.params
        holder, contender = env.backend(), env.backend()
        history = Recorder()
        try:
            history.add("holder", Type.INVOKE, F.ACQUIRE)
            acquired = holder.acquire()
            t0 = time.monotonic()
            history.granted("holder", acquired, at=t0)
            got_at, polls = None, 0
            # A second process polls on its own 50 ms grid, not one aligned with the kill:
            # each trial gets a different, reproducible phase within the interval.
            phase = p["poll"] * ((env.spec.index * 0.618) % 1.0)
            refused_at: list[float] = []  # when each poll that found the lock taken started (s after t0)
            with TerminateSession(env.monitor, holder.lock_pid, p["kill_at"], t0) as kill:
                while got_at is None and polls * p["poll"] <= p["kill_at"] + p["give_up"]:
                    env.wait_until(t0, phase + polls * p["poll"])
                    polls += 1
                    started = time.monotonic() - t0
                    history.add("poller", Type.INVOKE, F.ACQUIRE, at=t0 + started)
                    if contender.acquire():
                        got_at = time.monotonic() - t0
                        history.add("poller", Type.OK, F.ACQUIRE, at=t0 + got_at, scope="run")
                    else:
                        refused_at.append(started)
                        history.add("poller", Type.FAIL, F.ACQUIRE)
                evidence = kill.confirm()  # FaultNotConfirmed: the trial is an error, not a verdict
                assert kill.fired_at is not None  # confirm() raised if it never fired
                history.add("fault", Type.OK, F.FAULT, at=t0 + kill.fired_at, name="terminate", pid=holder.lock_pid)
            if got_at is not None:
                contender.release()
            killed_at = kill.fired_at
            return {
                "acquired": acquired, "kill_at": p["kill_at"], "poll": p["poll"],
                "killed_at": None if killed_at is None else round(killed_at, 4),
                "got_at": None if got_at is None else round(got_at, 4),
                "gap": None if got_at is None or killed_at is None else round(got_at - killed_at, 4),
                # The server's part of the gap: the last refusal after the kill (None: none after it).
                "still_held_at": _last_refusal_after(refused_at, killed_at),
                "server_said": sessions.why_ended(env.services, env.monitor, holder.lock_pid),
                "evidence": evidence, "history": ops.to_json(history.ops()),
            }
        finally:
            holder.close()
            contender.close()

    def judge(self, measures: dict, backend_cls) -> Verdict:
        """The checkers: the poller got the lock while the holder still believed it held (lost, and no write
        to judge), with how soon the poller saw it free read from the same history."""
        found = detection(ops.from_json(measures["history"]), "poller", measures["poll"])
        return judged(measures, backend_cls, **({"detection": found} if found else {}))


def _last_refusal_after(refused_at: list[float], killed_at: float | None) -> float | None:
    """Seconds from the kill to the start of the last poll that still found the lock taken."""
    if killed_at is None:
        return None
    after = [t - killed_at for t in refused_at if t >= killed_at]
    return round(max(after), 4) if after else None
