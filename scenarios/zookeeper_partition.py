"""A three-server ZooKeeper ensemble mid-hold, with the holder's server partitioned from the other two.

Each trial starts its own ensemble (lab/servers/zookeeper/ensemble.py) under the run's temp dir; the
trial's writes still go to the run's PostgreSQL. Each kazoo client is given one server, as a client on
one side of a partition reaches only the servers on its side: the contender a follower that stays on
the majority side, the holder the other follower. The trial is the lease-fault shape
(scenarios/_lease_faults.py): the holder takes its lock and stops before its write, the fault cuts its
server off from the other two and is confirmed by the servers' own view, a contender asks the majority,
the fault heals, the holder writes.

What ZooKeeper does: the cut-off follower hears nothing from its leader for syncLimit (1 s), stops
serving its clients and looks for a leader it cannot reach; the holder's kazoo loses its connection
(SUSPENDED) and cannot reconnect to that server; the leader, which keeps every session's timeout, hears
no ping for the holder's session and expires it after its timeout, deleting the lock's node, so the
contender gets the lock from the majority. After the heal the holder's kazoo reconnects and is told
its session expired (LOST).

One file: the fault and its scenario. Three JVMs start per trial (about 4 s and 57 MB each here), so
the trials run one at a time, with nothing beside them.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace

from lab.checkers.outcomes import DoesNotRun
from lab.declarations.columns import Column, FaultFamily
from lab.stack.exposure import YES, Trait, when
from lab.faults.base import Fault, FaultNotConfirmed, Route, Target
from lab.declarations.pacing import Lane
from lab.servers.abilities import PartitionsMembers
from lab.servers.services import Services
from lab.servers.zookeeper import server as zookeeper
from lab.servers.zookeeper.ensemble import ZooKeeperEnsemble
from scenarios._lease_faults import LeaseFaultScenario, lease_params, lease_fault_trial
from scenarios._trial_folders import swept_folder
from scenarios.base import Skip, TrialEnv

CONFIRM_WITHIN = 5.0  # seconds for the cut-off server to give up its leader (syncLimit is 1 s)


class ZooKeeperPartitionFault(Fault):
    """The holder's server, a follower, cut off from the other two (every peer link, both ways), then healed.

    confirm() takes the servers' word for it: the cut-off server serves no clients (`srvr` says it is not
    serving requests), the other two are a leader and its follower, and a probe written through the
    contender's server commits there; no peer connection bypasses the proxies, and the holder's client
    talked to its server before the cut. heal() reports the bytes relayed across the partition (0)."""

    name = "zookeeper_partition"
    label = "the holder's ZooKeeper server partitioned from the other two"
    strikes = "zookeeper"
    needs_server = PartitionsMembers
    no_server = "needs three ZooKeeper servers the lab started; it never partitions yours"

    def __init__(self) -> None:
        self.holder_member: str | None = None

    def route(self, services: Services, backend_cls) -> Route:
        ensemble = services.embedded["zookeeper"]
        contender = ensemble.member_at(services.zookeeper())
        member = next(m for m in ensemble.followers() if m is not contender)
        self.holder_member = member.name
        return Route(lock_services=services.routed("zookeeper", [member.client_proxy.port]))

    def _sides(self, target: Target) -> tuple:
        ensemble = target.services.embedded["zookeeper"]
        return ensemble, ensemble.member(self.holder_member), ensemble.member_at(target.services.zookeeper())

    @staticmethod
    def _modes(ensemble, members) -> dict:
        views = {}
        for member in members:
            try:
                views[member.name] = ensemble.mode(member) or "not serving"
            except OSError as exc:  # a server that cannot answer is reported as such, not skipped
                views[member.name] = f"no answer ({type(exc).__name__})"
        return views

    def inject(self, target: Target) -> None:
        ensemble, holder, _ = self._sides(target)
        target.evidence.update(modes_before=self._modes(ensemble, ensemble.members),
                               crossing_before=ensemble.link_bytes(holder),
                               holder_link_before=holder.client_proxy.relayed_bytes())
        ensemble.isolate(holder)

    def confirm(self, target: Target, within: float = CONFIRM_WITHIN) -> dict:
        ensemble, holder, contender = self._sides(target)
        if ensemble.isolated != {holder.name}:
            raise FaultNotConfirmed(f"the partition cut off {sorted(ensemble.isolated)}, not the holder's {holder.name}")
        before = target.evidence["modes_before"]
        if before.get(holder.name) != "follower":
            raise FaultNotConfirmed(f"the holder's server {holder.name} was {before.get(holder.name)!r} at the cut, "
                                    f"not a follower (the leader moved)")
        if contender is None or contender is holder:
            raise FaultNotConfirmed("the contender's server is not on the majority side")
        if target.evidence.get("holder_link_before", 0) == 0:
            raise FaultNotConfirmed(f"the holder's client never talked to {holder.name}: its proxy relayed no bytes")
        unknown = [c for c in ensemble.peer_links() if c.dialer is None]
        if unknown:  # a connection whose dialer is unknown is never cut: the partition could leak through it
            raise FaultNotConfirmed(f"{len(unknown)} peer connection(s) from no known server")
        bypass = ensemble.unproxied_links()
        if bypass:
            raise FaultNotConfirmed(f"peer connections no proxy carries: {bypass}")
        majority = [m for m in ensemble.members if m is not holder]
        deadline = time.monotonic() + within
        while True:
            modes = self._modes(ensemble, ensemble.members)
            if modes[holder.name] == "not serving" and sorted(modes[m.name] for m in majority) == ["follower", "leader"]:
                break
            if time.monotonic() > deadline:
                raise FaultNotConfirmed(f"{within:g} s after the cut the servers say {modes}: not a partition")
            time.sleep(0.05)  # a server has no event for "lost my leader": ask again
        return {"fault": self.name, "isolated": holder.name, "holder_member": holder.name,
                "contender_member": contender.name, "modes_before": before, "modes_after": modes,
                "probe_zxid": hex(_probe_write(contender)), "majority_zxid": hex(ensemble.zxid(contender) or 0)}

    def heal(self, target: Target) -> dict:
        ensemble = target.services.embedded.get("zookeeper")
        if ensemble is None or not ensemble.isolated:
            return {}
        holder = ensemble.member(self.holder_member)
        during = ensemble.link_bytes(holder) - target.evidence.get("crossing_before", 0)
        talked = holder.client_proxy.relayed_bytes() - target.evidence.get("holder_link_before", 0)
        ensemble.heal()
        return {"relayed_across_partition": during, "holder_to_its_server_during": talked}


def _probe_write(member) -> int:
    """A node created through the member's own port, committed by its side's quorum: its czxid."""
    from kazoo.client import KazooClient  # the libraries extra: only ZooKeeper locks reach this fault

    client = KazooClient(hosts=f"127.0.0.1:{member.client_port}", timeout=5.0)
    client.start(timeout=5.0)
    try:
        path = client.create("/locklab-probe/p", b"", makepath=True, sequence=True, ephemeral=True)
        return int(client.exists(path).czxid)
    finally:
        client.stop()
        client.close()


class ZooKeeperPartition(LeaseFaultScenario):
    name = "zookeeper_partition"
    # Its ensemble elects and expires sessions on 100 ms ticks, and three JVMs start per trial: another
    # scenario's load would move those timers, so it runs with nothing beside it.
    pacing = replace(LeaseFaultScenario.pacing, lane=Lane.ALONE)
    fault = ZooKeeperPartitionFault
    summary = "a three-server ZooKeeper ensemble mid-hold: the holder's server partitioned from the other two"
    title = "ZooKeeper server partitioned"
    replicated = True
    columns = (
        Column("holder_member", "the holder's ZooKeeper server partitioned", 19.5,
               "the holder's server, a follower, cut off from the other two; confirmed by the servers: it serves no "
               "clients, the other two are a leader and its follower, and a probe commits through them",
               family=FaultFamily.NETWORK, happens_when=(when(Trait.ZOOKEEPER_ENSEMBLE, YES),), strikes=("zookeeper",)),
    )
    params = lease_params(parallel=1)

    def pg_sessions(self, backend_cls, profile: str) -> int:
        return 2  # the holder process's monitor and writes on the run's PostgreSQL; the contender uses the pool

    def trial_seconds(self, profile: str) -> float:
        return super().trial_seconds(profile) + 5.0  # three JVMs start and elect a leader first

    def run_trial(self, env: TrialEnv) -> dict:
        if (missing := zookeeper.missing()) is not None:  # a ZooKeeper of the user's, but none here to start
            raise Skip(DoesNotRun(missing))
        root = swept_folder(env.services, "zookeeper-ensemble")
        ensemble = ZooKeeperEnsemble(root)
        try:
            started = time.monotonic()
            ensemble.start()
            start_s = time.monotonic() - started  # the price of an ensemble per trial, kept with the trial
            contender = ensemble.followers()[-1]  # a follower: on the majority side
            services = replace(env.services, zk_hosts=contender.hosts, embedded={"zookeeper": ensemble}, tmp=None)
            measures: dict = dict(lease_fault_trial(replace(env, services=services), self.fault_of(env.spec.variant)))
        finally:
            ensemble.stop()
            shutil.rmtree(root, ignore_errors=True)
        measures["ensemble_start_s"] = round(start_s, 2)
        holder_token, contender_token = measures["holder"]["token"], measures["contender"]["token"]
        if measures["contender"]["acquired"] and holder_token and contender_token:  # 0: a lock without one
            measures["token_increased"] = contender_token > holder_token
        return measures
