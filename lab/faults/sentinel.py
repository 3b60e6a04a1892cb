"""Redis failed over by Sentinel: the primary paused, the primary cut from the Sentinels and the replica, or a
failover forced; each confirmed by the Sentinels' own view and the servers'.

They strike a primary and replica under three Sentinels the lab started (lab/servers/sentinel/cluster.py).
confirm() waits for Sentinel to fail over and proves it from both sides: a Sentinel published
+switch-master naming the replica, a majority of Sentinels answer get-master-addr-by-name with the
replica's address, and the replica itself answers ROLE as a master. Each fault then says what the
old primary says of itself (ROLE, read on its own port): a primary that still answers as a master
while the Sentinels have another is the stale-master window.

settle() is the other half of a heal: the Sentinels must take the old primary back as a replica of the
new one (+convert-to-slave, and its own ROLE), which they do only once it has been reachable for a while.
A trial waits for that, so every trial ends with the service whole; one that does not get there in
DEMOTED_WITHIN is an error, never a verdict. From inject() to settle() a PromotionWatch
(lab/servers/redis/promotion.py) records the promotion measures.
"""

from __future__ import annotations

import time
from typing import ClassVar

import psutil

from lab.faults.base import Fault, FaultNotConfirmed, Target
from lab.servers.abilities import ManagedBySentinel
from lab.servers.redis.promotion import PROBE_TIMEOUT_S, PromotionWatch
from lab.servers.sentinel.cluster import SentinelRedis

FAILOVER_WITHIN = 30.0  # Sentinel's failover, from the fault (down-after plus an election: seconds)
DEMOTED_WITHIN = 40.0  # the old primary taken back as a replica, from the heal (Sentinel waits ~8 s first)
PROBE_PREFIX = "locklab:probe"


class SentinelFault(Fault):
    """What the three share: the lever is the subclass's; the confirmation, the watch and the settling are here."""
    strikes = "redis"

    needs_server = ManagedBySentinel
    no_server = ("a Sentinel failover needs a primary, a replica and Sentinels the lab started; on yours it runs "
                 "your own command")
    hook: ClassVar[str]  # the --fault-command that performs it on servers the lab did not start

    def __init__(self) -> None:
        self.watch: PromotionWatch | None = None
        self.t_fault: float | None = None
        self.t_healed: float | None = None

    @staticmethod
    def servers(target: Target) -> SentinelRedis:
        servers = target.services.embedded.get("redis")
        if not isinstance(servers, SentinelRedis):
            raise FaultNotConfirmed("this trial's Redis is not under Sentinels the lab started")
        return servers

    def inject(self, target: Target) -> None:
        servers = self.servers(target)
        self.t_fault = time.monotonic()
        self.watch = PromotionWatch(
            f"sentinel {servers.version}",
            old_primary=lambda: servers.client(servers.first, PROBE_TIMEOUT_S),
            promoted=lambda: (servers.try_role(servers.second) or {}).get("role") == "master",
            key_prefix=PROBE_PREFIX)
        self.watch.start(self.t_fault)
        target.evidence["before"] = {"first": servers.role(servers.first), "second": servers.role(servers.second)}
        self.strike(servers, target)
        self.watch.struck()

    def strike(self, servers: SentinelRedis, target: Target) -> None:
        raise NotImplementedError

    def confirm(self, target: Target) -> dict:
        servers = self.servers(target)
        t_fault = self.t_fault or time.monotonic()
        new_address = servers.address(servers.second)
        wanted = f"{new_address[0]} {new_address[1]}"
        switch = servers.events.wait_for("+switch-master", t_fault, FAILOVER_WITHIN,
                                         lambda e: e.data.endswith(wanted)) if servers.events else None
        if switch is None:
            raise FaultNotConfirmed(f"no Sentinel published +switch-master to the replica within "
                                    f"{FAILOVER_WITHIN:.0f} s of the fault")
        named = self._majority_names(servers, new_address)
        second = self._answers_master(servers)
        events = servers.events.since(t_fault) if servers.events else []
        first_of: dict[str, float] = {}
        for event in events:  # when each step was first published, from the fault
            first_of.setdefault(event.channel, round(event.at - t_fault, 3))
        evidence = {"fault": self.name, "switch_master_after_s": round(switch.at - t_fault, 3),
                    "switch_master_from": switch.sentinel, "sentinels_name": {k: list(v) if v else None
                                                                              for k, v in named.items()},
                    "new_primary_role": second, "sentinel_events_after_s": first_of,
                    **target.evidence.pop("strike", {})}
        evidence.update(self.after_failover(servers, target))
        return evidence

    @staticmethod
    def _majority_names(servers: SentinelRedis, address: tuple[str, int], within: float = 10.0) -> dict:
        """Until a majority of Sentinels answer get-master-addr-by-name with address (the others learn of a
        failover from the leader's hello messages, within a few seconds)."""
        deadline = time.monotonic() + within
        while True:
            named = servers.master_addrs()
            if sum(a == address for a in named.values()) > len(named) // 2:
                return named
            if time.monotonic() > deadline:
                raise FaultNotConfirmed(f"after +switch-master the Sentinels name {named}, not a majority {address}")
            time.sleep(0.1)

    @staticmethod
    def _answers_master(servers: SentinelRedis, within: float = 10.0) -> dict:
        deadline = time.monotonic() + within
        while True:
            role = servers.try_role(servers.second)
            if role is not None and role["role"] == "master":
                return role
            if time.monotonic() > deadline:
                raise FaultNotConfirmed(f"the Sentinels named the replica, which answers ROLE {role}")
            time.sleep(0.05)

    def after_failover(self, servers: SentinelRedis, target: Target) -> dict:
        """What the old primary says of itself once the Sentinels have another (the subclass may act first)."""
        return {"old_primary_role_after_failover": servers.try_role(servers.first)}

    def heal(self, target: Target) -> dict:
        servers = target.services.embedded.get("redis")
        if isinstance(servers, SentinelRedis):
            self.undo(servers)
        if self.t_healed is None and servers is not None:
            self.t_healed = time.monotonic()
        return {}

    def undo(self, servers: SentinelRedis) -> None:
        """What the heal puts back on the lab's servers before the Sentinels settle: nothing, unless the fault says."""

    def settle(self, servers: SentinelRedis) -> tuple[dict, dict]:
        """After the heal: until the Sentinels took the old primary back as a replica of the new one. Returns
        (evidence, the promotion measures); FaultNotConfirmed when the service is not whole in time."""
        healed = self.t_healed or time.monotonic()
        t_fault = self.t_fault or healed
        deadline = healed + DEMOTED_WITHIN
        new_ports = {servers.second.port, servers.address(servers.second)[1]}  # its own port, or its proxy's
        while True:
            role = servers.try_role(servers.first)
            if role is not None and role["role"] == "slave" and role.get("master_port") in new_ports:
                break
            if time.monotonic() > deadline:
                said = sorted({e.channel for e in servers.events.since(healed)}) if servers.events else []
                raise FaultNotConfirmed(f"the old primary was not taken back as a replica within {DEMOTED_WITHIN:.0f} s "
                                        f"of the heal: it answers ROLE {role}; the Sentinels published {said}")
            time.sleep(0.05)  # Sentinel reconfigures it on its own schedule; nothing to wait on but its state
        demoted_at = time.monotonic()
        converted = servers.events.wait_for("+convert-to-slave", t_fault, 0.5) if servers.events else None
        watch = self._watch()
        watch.wait_probe_ended(2.0)  # its next write meets READONLY
        promotion = watch.result(lambda: servers.client(servers.second))
        evidence = {"old_primary_demoted_after_heal_s": round(demoted_at - healed, 3),
                    "old_primary_demoted_after_fault_s": round(demoted_at - t_fault, 3),
                    "convert_to_slave_after_fault_s": None if converted is None else round(converted.at - t_fault, 3),
                    "sentinels_name_after": {k: list(v) if v else None for k, v in servers.master_addrs().items()},
                    **watch.evidence()}
        return evidence, promotion

    def _watch(self) -> PromotionWatch:
        if self.watch is None:
            raise FaultNotConfirmed("the fault was never injected")
        return self.watch

    def stop_watch(self) -> None:
        if self.watch is not None:
            self.watch.stop()


class SentinelPause(SentinelFault):
    """The primary SIGSTOPped past down-after-milliseconds until Sentinel fails over, then SIGCONTed."""

    name = "sentinel_pause"
    label = "Redis primary paused until Sentinel failed over"
    hook = "pause"

    def __init__(self) -> None:
        super().__init__()
        self.stopped: list[int] = []

    def strike(self, servers: SentinelRedis, target: Target) -> None:
        self.stopped = servers.pause(servers.first)
        states = {pid: _state(pid) for pid in self.stopped}
        deadline = time.monotonic() + 5.0
        while not all(s == psutil.STATUS_STOPPED for s in states.values()) and time.monotonic() < deadline:
            time.sleep(0.005)  # the kernel has no event for "stopped"; its state is polled
            states = {pid: _state(pid) for pid in self.stopped}
        if not self.stopped or not all(s == psutil.STATUS_STOPPED for s in states.values()):
            raise FaultNotConfirmed(f"the primary was not stopped after SIGSTOP: {states}")
        target.evidence["strike"] = {"paused_pids": list(self.stopped), "process_state": "T"}

    def after_failover(self, servers: SentinelRedis, target: Target) -> dict:
        """Continued once Sentinel has failed over: it comes back believing it is still the primary."""
        paused_for = time.monotonic() - (self.t_fault or time.monotonic())
        self.undo(servers)
        deadline, role = time.monotonic() + 5.0, None
        while role is None and time.monotonic() < deadline:
            role = servers.try_role(servers.first)
            time.sleep(0.02)
        if role is None:
            raise FaultNotConfirmed("the old primary did not answer after SIGCONT")
        self.t_healed = time.monotonic()  # the pause is over: from here only Sentinel can end the stale window
        return {"paused_s": round(paused_for, 3), "old_primary_role_after_resume": role}

    def undo(self, servers: SentinelRedis) -> None:
        """SIGCONT whatever the strike stopped (again, if it is running already)."""
        for pid in self.stopped:
            try:
                psutil.Process(pid).resume()
            except psutil.NoSuchProcess:
                pass


class SentinelPartition(SentinelFault):
    """The primary cut from the Sentinels and the replica, not from its clients: the stale-master window."""

    name = "sentinel_partition"
    label = "Redis primary cut from the Sentinels and its replica"
    hook = "partition"

    def strike(self, servers: SentinelRedis, target: Target) -> None:
        servers.isolate_primary()
        target.evidence["strike"] = {"isolated": servers.isolated}

    def after_failover(self, servers: SentinelRedis, target: Target) -> dict:
        """The old primary, cut off, still answers as a master to a client on its side."""
        links = [c for c in servers.front_connections() if c["to"] == servers.label(servers.first)]
        unknown = [c for c in links if c["dialer"] is None]
        if unknown:
            raise FaultNotConfirmed(f"{len(unknown)} connection(s) to the primary came from an unknown dialer: the cut "
                                    "cannot say it held them")
        return {"old_primary_role_during_cut": servers.try_role(servers.first),
                "dialers_to_old_primary": sorted({c["dialer"] for c in links})}

    def undo(self, servers: SentinelRedis) -> None:
        servers.heal_partition()


class SentinelForcedFailover(SentinelFault):
    """SENTINEL FAILOVER: a failover with every server up (a planned one, or an operator's)."""

    name = "sentinel_failover"
    label = "Redis failover forced through Sentinel"
    hook = "failover"

    def strike(self, servers: SentinelRedis, target: Target) -> None:
        target.evidence["strike"] = {"sentinel_failover": servers.force_failover()}

    def after_failover(self, servers: SentinelRedis, target: Target) -> dict:
        self.t_healed = time.monotonic()  # nothing to undo: from here the Sentinels settle it
        return super().after_failover(servers, target)


def _state(pid: int) -> str:
    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return "gone"
