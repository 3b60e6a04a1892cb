"""Kleppmann's clock case against Redlock: one of the masters that granted the holder's lock has its clock jump.

Martin Kleppmann ("How to do distributed locking", 2016): client 1 holds the lock on masters A, B and C
(D and E unreachable); C's clock jumps forward, so the key expires on C; client 2 takes C, D and E, a
majority, while client 1 still believes it holds. Here on real masters: prepare() starts five masters
of the trial's own, each on a fake clock of its own (lab/servers/fake_clock.py), and stops two of them,
so the holder's grant stands on exactly three; inject() brings the two back, empty (they never saw
the holder's request), checks that exactly three masters hold the key, and jumps the clock of the
first of them forward by strength x TTL; confirm() reads that master's TIME against the real clock
and records which masters still hold the key. The contender asks all five at once, while the holder's
lease still runs on every other clock. With strength 0 (RedlockClockControl) nothing moves: the same
trial with no jump, the control that must stay safe.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from lab.faults.base import FaultNotConfirmed, Route, Target
from lab.faults.redlock_restart import keys_on
from lab.faults.server_clock import ClockedServer, FastClock, JumpClock, ServerClock, clocked_redis
from lab.servers.fake_clock import ClockReading
from lab.servers.services import Services

MASTERS = 5
DOWN_WHILE_ASKING = 2  # the holder's grant then rests on exactly a quorum


class RedlockMastersClock(ServerClock):
    """Five masters of the trial's own, each on a fake clock; the clock of one that granted the holder's lock moves."""

    def __init__(self, strength: float | None = None):
        super().__init__(strength)
        self._granted: list[int] = []

    def service_reason(self, service: str) -> str | None:
        if service != "redlock":
            return f"its lock is on {service}, not on Redlock masters"
        return None

    def make_servers(self, root: Path, library: Path, services: Services, backend_cls) -> list[ClockedServer]:
        return [clocked_redis(root, root / "clocks", library, f"master{i}") for i in range(MASTERS)]

    def prepare(self, services: Services, backend_cls) -> None:
        super().prepare(services, backend_cls)
        for master in self.servers[-DOWN_WHILE_ASKING:]:
            master.server.stop()  # down while the holder asks

    def route(self, services: Services, backend_cls) -> Route:
        urls = [master.server.url for master in self.servers]
        return Route(lock_services=replace(services, redlock_urls=urls, embedded={}, tmp=None), own_servers=True)

    def choose(self, target: Target) -> ClockedServer:
        # Back, empty, both at once: the time they take comes off what is left of the holder's lease when the
        # clock jumps. Their clocks never move, so they need no calibration.
        with ThreadPoolExecutor(DOWN_WHILE_ASKING) as pool:
            list(pool.map(lambda master: master.start(calibrate=False), self.servers[-DOWN_WHILE_ASKING:]))
        granted = [i for i, master in enumerate(self.servers) if keys_on(master.server)]
        if len(granted) != MASTERS - DOWN_WHILE_ASKING:
            raise FaultNotConfirmed(f"the holder's grant stands on {len(granted)} masters, not on exactly "
                                    f"{MASTERS - DOWN_WHILE_ASKING}")
        self._granted = granted
        return self.servers[granted[0]]

    def check(self, server: ClockedServer, before: ClockReading, ttl: float) -> dict:
        evidence = super().check(server, before, ttl)
        holding = [i for i, master in enumerate(self.servers) if keys_on(master.server)]
        return {**evidence, "masters": MASTERS, "granted_by": self._granted, "struck_master": self.servers.index(server),
                "granted_by_after": holding, "key_on_struck_after": self.servers.index(server) in holding}


class RedlockClockJump(RedlockMastersClock, JumpClock):
    """Kleppmann's case: the clock of one master that granted jumps forward by strength x TTL."""

    name = "redlock_clock_jump"
    label = "a Redlock master that granted had its clock jump forward past the TTL"
    default_strength = 2.0


class RedlockClockControl(RedlockClockJump):
    """The same trial with no jump: the struck master's clock is read and left as it is."""

    name = "redlock_clock_control"
    label = "the same Redlock trial with no clock jump"
    default_strength = 0.0


class RedlockClockFast(RedlockMastersClock, FastClock):
    """One master that granted runs fast: its copy of the key lapses early, as a jumped one does."""

    name = "redlock_clock_fast"
    label = "a Redlock master that granted running fast"
    default_strength = 1.0
