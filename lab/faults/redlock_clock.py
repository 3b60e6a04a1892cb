"""Kleppmann's clock case against Redlock: one of the masters that granted the holder's lock has its clock jump.

Martin Kleppmann ("How to do distributed locking", 2016): client 1 holds the lock on masters A, B and C
(D and E unreachable); C's clock jumps forward, so the key expires on C; client 2 takes C, D and E, a
majority, while client 1 still believes it holds. Here on real masters: prepare() starts five masters
of the trial's own, each on a fake clock of its own (lab/servers/fake_clock.py), and has two of them
refuse SET (an ACL rule on their user) while the holder asks, so its grant stands on exactly three, as
if those two had been unreachable; inject() lets them accept writes again (one command each, so the
clock moves milliseconds after the grant: stopping and restarting them took up to a second here, which
came off the lease the jump must exceed), checks that exactly three masters hold the key, and jumps the
clock of the first of them forward by strength x TTL; confirm() reads that master's TIME against the
real clock and records which masters still hold the key. The contender asks all five at once, while the
holder's lease still runs on every other clock. With strength 0 (RedlockClockControl) nothing moves: the
same trial with no jump, the control that must stay safe.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from lab.faults.base import FaultNotConfirmed, Route, Target
from lab.faults.redlock_restart import keys_on
from lab.faults.server_clock import ClockedServer, FastClock, JumpClock, ServerClock, clocked_redis
from lab.servers.clients import redis_client
from lab.servers.fake_clock import ClockReading
from lab.servers.services import Services

MASTERS = 5
REFUSING_WHILE_ASKING = 2  # the holder's grant then rests on exactly a quorum


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
        self._refuse_set(True)  # while the holder asks

    def _refuse_set(self, refuse: bool) -> None:
        """The last two masters' user may (not) run SET: a Redlock client counts such a master's error as no grant."""
        for master in self.servers[-REFUSING_WHILE_ASKING:]:
            client = redis_client(master.server.url, socket_timeout=5)
            try:
                client.execute_command("ACL", "SETUSER", "default", "-set" if refuse else "+set")
            finally:
                client.close()

    def route(self, services: Services, backend_cls) -> Route:
        urls = [master.server.url for master in self.servers]
        return Route(lock_services=replace(services, redlock_urls=urls, embedded={}, tmp=None), own_servers=True)

    def _refusals(self, master: ClockedServer) -> int:
        """How many error replies this master gave (INFO stats): the refused SETs. A client that sets its key by Lua
        (aioredlock, node-redlock) is refused inside the script, which Redis 6.2 counts as ERR, not NOPERM;
        nothing else sends these fresh masters a command that fails."""
        client = redis_client(master.server.url, socket_timeout=5)
        try:
            return int(client.info("stats").get("total_error_replies", 0))
        finally:
            client.close()

    def _wait_refused(self, within: float = 5.0) -> None:
        """Until each refusing master has refused the holder's SET: a Redlock client may send its request to the
        last masters after it has its quorum (pottery does, from its thread pool, on a busy machine), and one that
        arrived after the masters accept writes again would put the holder's grant on four."""
        deadline = time.monotonic() + within
        waiting = self.servers[-REFUSING_WHILE_ASKING:]
        while waiting := [m for m in waiting if self._refusals(m) < 1]:
            if time.monotonic() > deadline:
                raise FaultNotConfirmed(f"the holder's request never reached {', '.join(m.name for m in waiting)} "
                                        f"within {within:g} s")
            time.sleep(0.01)  # Redis has no event for a refused command; its error count is polled

    def choose(self, target: Target) -> ClockedServer:
        self._wait_refused()
        self._refuse_set(False)  # free for whoever asks next
        granted = [i for i, master in enumerate(self.servers) if keys_on(master.server)]
        if len(granted) != MASTERS - REFUSING_WHILE_ASKING:
            raise FaultNotConfirmed(f"the holder's grant stands on {len(granted)} masters, not on exactly "
                                    f"{MASTERS - REFUSING_WHILE_ASKING}")
        self._granted = granted
        return self.servers[granted[0]]

    def check(self, server: ClockedServer, before: ClockReading, ttl: float) -> dict:
        evidence = super().check(server, before, ttl)
        holding = [i for i, master in enumerate(self.servers) if keys_on(master.server)]
        return {**evidence, "masters": MASTERS, "granted_by": self._granted, "struck_master": self.servers.index(server),
                "refused_while_asking": list(range(MASTERS - REFUSING_WHILE_ASKING, MASTERS)),
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
