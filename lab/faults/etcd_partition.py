"""One etcd member cut off from the other two (every peer link, both ways), then healed.

It strikes a three-member cluster the lab started (lab/servers/etcd/cluster.py). The holder's
client talks to one member, the contender's to another (the scenario puts the contender's member in
Services.etcd_endpoint; route() gives the holder its own). EtcdPartition isolates the holder's
member, a follower; EtcdPartitionLeader isolates the leader, and the holder talks to the leader.
Either way the holder is on the minority side with its member and the contender on the majority.

confirm() takes the members' own word for it: the isolated member follows no leader and its
/health says so; the other two follow the same leader, one of themselves; a probe written through
that side commits there while the isolated member's committed raft index stays where it was. It
also checks the sides are the ones the trial means: the holder's member is the isolated one (a
leader that moved between route and inject makes the trial an error, never a verdict) and the
contender's is not. heal() reports the bytes relayed across the partition while it stood (0).
"""

from __future__ import annotations

import time

from lab.faults.base import Fault, FaultNotConfirmed, Route, Target
from lab.servers.abilities import PartitionsMembers
from lab.servers.services import Services

CONFIRM_WITHIN = 5.0  # seconds for the isolated member to give up its leader (its election timeout is 0.5-1 s)


class EtcdClusterFault(Fault):
    """What both etcd cluster faults share: they apply to etcd locks, on a cluster the lab started."""
    strikes = "etcd"

    needs_server = PartitionsMembers
    no_server = "needs three etcd members the lab started; it never partitions or kills yours"

    def __init__(self):
        self.holder_member: str | None = None

    def _holder_member(self, cluster, contender):
        """The member the holder's client is given (the contender's is Services.etcd_endpoint's)."""
        return next(m for m in cluster.followers() if m is not contender)

    def route(self, services: Services, backend_cls) -> Route:
        cluster = services.embedded["etcd"]
        contender = cluster.member_at(services.etcd_endpoint)
        member = self._holder_member(cluster, contender)
        self.holder_member = member.name
        return Route(lock_services=services.routed("etcd", [member.client_proxy.port]))

    def _sides(self, target: Target) -> tuple:
        cluster = target.services.embedded["etcd"]
        return cluster, cluster.member(self.holder_member), cluster.member_at(target.services.etcd_endpoint)

    @staticmethod
    def _views(cluster, members) -> dict:
        views = {}
        for member in members:
            try:
                views[member.name] = cluster.status(member)
            except Exception as exc:  # a member that cannot answer is reported as such, not skipped
                views[member.name] = {"error": type(exc).__name__}
        return views


class EtcdPartition(EtcdClusterFault):
    name = "etcd_partition"
    label = "the holder's etcd member partitioned from the other two"
    isolates = "holder_member"

    def inject(self, target: Target) -> None:
        cluster, holder, _ = self._sides(target)
        victim = holder if self.isolates == "holder_member" else cluster.wait_leader()
        target.evidence.update(isolated=victim.name, views_before=self._views(cluster, cluster.members),
                               crossing_before=cluster.link_bytes(victim)["crossing"],
                               holder_link_before=holder.client_proxy.relayed_bytes())
        cluster.isolate(victim)

    def confirm(self, target: Target, within: float = CONFIRM_WITHIN) -> dict:
        cluster, holder, contender = self._sides(target)
        if not cluster.isolated:
            raise FaultNotConfirmed("no member is isolated: the partition was never made")
        [name] = cluster.isolated
        victim = cluster.member(name)
        majority = [m for m in cluster.members if m is not victim]
        if holder is not victim:
            raise FaultNotConfirmed(f"the isolated member is {victim.name}, the holder's is {holder.name} "
                                    f"(the leader moved before the partition)")
        if contender is victim:
            raise FaultNotConfirmed(f"the contender's member {contender.name} is the isolated one")
        if target.evidence.get("holder_link_before", 0) == 0:
            raise FaultNotConfirmed(f"the holder's client never talked to {holder.name}: its proxy relayed no bytes")
        unknown = [c for c in cluster.peer_links() if c.dialer is None]
        if unknown:  # a connection whose dialer is unknown is never cut: the partition could leak through it
            raise FaultNotConfirmed(f"{len(unknown)} peer connection(s) from no known member")
        deadline = time.monotonic() + within
        while True:
            views = self._views(cluster, cluster.members)
            minority, sides = views[victim.name], {views[m.name].get("leader") for m in majority}
            if minority.get("leader") is None and "error" not in minority and len(sides) == 1 \
                    and sides <= {m.name for m in majority}:
                break
            if time.monotonic() > deadline:
                raise FaultNotConfirmed(f"{within:g} s after the cut, {victim.name} follows "
                                        f"{minority.get('leader') or minority.get('error')} and the others "
                                        f"{sorted(map(str, sides))}: not a partition")
            time.sleep(0.05)  # a member has no event for "lost my leader": ask again
        new_leader = cluster.member(sides.pop())
        probe_revision = cluster.probe_write(new_leader)  # committed by the majority alone
        after = self._views(cluster, cluster.members)
        stuck, moved = after[victim.name], min(after[m.name].get("raft_index", -1) for m in majority)
        if stuck.get("raft_index") != minority.get("raft_index") or moved <= stuck.get("raft_index", -1):
            raise FaultNotConfirmed(f"{victim.name}'s committed index went {minority.get('raft_index')} -> "
                                    f"{stuck.get('raft_index')} while the majority's is {moved}: it still replicates")
        health = cluster.health(victim)
        if health.get("health") != "false":
            raise FaultNotConfirmed(f"{victim.name}'s /health says {health}")
        before = target.evidence["views_before"]
        return {"fault": self.name, "isolated": victim.name, "holder_member": holder.name,
                "contender_member": contender.name if contender else None,
                "leader_before": before[victim.name].get("leader"), "leader_after": new_leader.name,
                "leader_changed": before[victim.name].get("leader") != new_leader.name,
                "isolated_view": stuck, "isolated_health": health, "majority_raft_index": moved,
                "probe_revision": probe_revision, "views_before": before}

    def heal(self, target: Target) -> dict:
        cluster = target.services.embedded.get("etcd")
        if cluster is None or not cluster.isolated:
            return {}
        [name] = cluster.isolated
        during = cluster.link_bytes(cluster.member(name))["crossing"] - target.evidence.get("crossing_before", 0)
        holder = cluster.member(self.holder_member)
        talked = holder.client_proxy.relayed_bytes() - target.evidence.get("holder_link_before", 0)
        cluster.heal()
        return {"relayed_across_partition": during, "holder_to_its_member_during": talked}


class EtcdPartitionLeader(EtcdPartition):
    name = "etcd_partition_leader"
    label = "the etcd leader (the holder's member) partitioned from the other two"
    isolates = "leader"

    def _holder_member(self, cluster, contender):
        return cluster.wait_leader()
