"""The etcd leader killed with SIGKILL mid-hold; heal() starts it again on its data and it rejoins.

It strikes a three-member cluster the lab started (lab/servers/etcd/cluster.py). The holder's and
the contender's clients each talk to one of the two followers, so both stay with the survivors
and the measurement is what a leader change does to a lease and to the revisions handed out.

confirm() takes the cluster's word: the killed process is gone, the two survivors follow the same
new leader (one of themselves) on a later raft term, and a probe written through them commits.
"""

from __future__ import annotations

import time

import psutil

from lab.faults.base import FaultNotConfirmed, Target
from lab.faults.etcd_partition import CONFIRM_WITHIN, EtcdClusterFault


class EtcdLeaderKill(EtcdClusterFault):
    name = "etcd_leader_kill"
    label = "the etcd leader killed (SIGKILL)"

    def inject(self, target: Target) -> None:
        cluster, holder, contender = self._sides(target)
        leader = cluster.wait_leader()
        target.evidence.update(killed=leader.name, views_before=self._views(cluster, cluster.members))
        target.evidence["killed_pid"] = cluster.kill(leader)

    def confirm(self, target: Target, within: float = CONFIRM_WITHIN) -> dict:
        cluster, holder, contender = self._sides(target)
        if "killed" not in target.evidence:
            raise FaultNotConfirmed("no member was killed")
        killed, pid = cluster.member(target.evidence["killed"]), target.evidence["killed_pid"]
        if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            raise FaultNotConfirmed(f"the leader's process (pid {pid}) still runs")
        if killed in (holder, contender):
            raise FaultNotConfirmed(f"the killed leader {killed.name} was the "
                                    f"{'holder' if killed is holder else 'contender'}'s member (the leader moved)")
        survivors = [m for m in cluster.members if m is not killed]
        term_before = target.evidence["views_before"][killed.name]["raft_term"]
        deadline = time.monotonic() + within
        while True:
            views = self._views(cluster, survivors)
            leaders = {v.get("leader") for v in views.values()}
            terms = {v.get("raft_term", 0) for v in views.values()}
            if len(leaders) == 1 and leaders <= {m.name for m in survivors} and min(terms) > term_before:
                break
            if time.monotonic() > deadline:
                raise FaultNotConfirmed(f"{within:g} s after killing {killed.name} the survivors follow "
                                        f"{sorted(map(str, leaders))} on terms {sorted(terms)} (was {term_before})")
            time.sleep(0.05)  # no event says an election ended: ask again
        new_leader = cluster.member(leaders.pop())
        return {"fault": self.name, "killed": killed.name, "killed_pid": pid, "leader_after": new_leader.name,
                "leader_changed": True, "term_before": term_before, "term_after": min(terms),
                "holder_member": holder.name, "contender_member": contender.name if contender else None,
                "probe_revision": cluster.probe_write(new_leader), "views_after": views}

    def heal(self, target: Target) -> dict:
        cluster = target.services.embedded.get("etcd")
        name = target.evidence.get("killed")
        if cluster is None or name is None or cluster.member(name).pids:
            return {}
        started = time.monotonic()
        cluster.restart(cluster.member(name))
        return {"restarted": name, "restart_s": round(time.monotonic() - started, 2)}
