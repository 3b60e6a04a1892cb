"""A three-member etcd loses a member mid-hold: the holder's member partitioned, the leader partitioned, the leader killed.

Each trial starts its own cluster (lab/servers/etcd/cluster.py) under the run's temp dir; the
trial's writes still go to the run's PostgreSQL. The lab's etcd backends take one endpoint each,
so each client is given one member: the contender always a follower that stays on the majority
side; the holder the member the variant says. The trial is the lease-fault shape
(scenarios/_lease_faults.py): the holder takes its lock and stops before its write, the fault
strikes and is confirmed by the members' own view, a contender asks the majority, the fault
heals, the holder writes.

Variants:
- holder_member: the holder's member (a follower) is cut off from the other two. The holder's
  keep-alives reach only a member without a leader; the majority lets its lease expire.
- leader: the leader is cut off, and the holder talks to the leader. The majority elects a new
  leader, whose revisions go on from the majority's log: a fencing token taken from it is higher
  than the holder's, from the old leader.
- leader_kill: the leader is killed (SIGKILL) while the holder and the contender each talk to one
  of the two followers: a leader change on the side where both are. heal() starts it again.

A cluster per trial took 1.8 s to start on an idle machine and 2-4 s with three starting at once on
two cores (measures' cluster_start_s), a third of a trial. One cluster for the whole scenario would
make its trials run one at a time (a partition reaches every trial on the cluster) and hand each
trial the leases, revisions and leader the last one left. So each trial still has a fresh cluster of
its own, but the next one is started ahead while the running trials wait out their TTLs
(lab/servers/ready_ahead.py; CLUSTERS_AHEAD says why only one): a trial records how long it waited
for its cluster (cluster_wait_s) beside how long that cluster took to start.

Besides the verdict a trial records each side's view (evidence), whether the contender's fencing
token (the lock key's revision, for the etcd backends that have one) was higher than the holder's,
and whether the holder still believed it held the lock after its write.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from lab import faults
from lab.declarations.columns import FaultFamily
from lab.stack.exposure import YES, Trait, when
from lab.declarations.pacing import Lane
from lab.servers.etcd.cluster import EtcdCluster
from lab.servers.ready_ahead import ReadyAhead
from lab.servers.services import Services
from lab.declarations.where import Service
from scenarios._column_kinds import ColumnKind
from scenarios._lease_faults import LeaseFaultScenario, lease_params, lease_fault_trial
from scenarios._trial_folders import swept_folder
from scenarios.base import TrialEnv

# One cluster starting ahead while `parallel` trials run. For the reference's 26 backends, one ahead: 76.8 s
# (82.7 s without), every verdict as before, though the median trial still waited 1.4 s of its cluster's 1.7 s
# (trials on the same timers end together). Three ahead: 60.9 s and no wait, but three of the twelve leader_kill
# trials lost their 2 s lease during the election (held before): more clusters starting at once took the CPU the
# elections needed, which is why this scenario runs alone.
CLUSTERS_AHEAD = 1



# Its columns: a three-member etcd that holds the lock, a member cut off or its leader lost.
ETCD_PARTITION = ColumnKind(FaultFamily.NETWORK, (when(Trait.ETCD_CLUSTER, YES),), (Service.ETCD,))
ETCD_LEADER_LOST = replace(ETCD_PARTITION, family=FaultFamily.FAILOVER)


class EtcdPartition(LeaseFaultScenario):
    name = "etcd_partition"
    # Its cluster elects on 100 ms heartbeats against 2 s leases: another scenario's load on the machine
    # moves elections and renewals, so it runs with nothing beside it.
    pacing = replace(LeaseFaultScenario.pacing, lane=Lane.ALONE)
    summary = ("a three-member etcd mid-hold: the holder's member partitioned, the leader (the holder's) "
               "partitioned, the leader killed")
    title = "etcd member partitioned or leader killed"
    replicated = True
    columns = (
        ETCD_PARTITION("holder_member", "the holder's etcd member partitioned", 17,
                       "the holder's member, a follower, cut off from the other two; confirmed by the members: it follows "
                       "no leader, the others follow one of themselves"),
        ETCD_PARTITION("leader", "the etcd leader (the holder's) partitioned", 18,
                       "the leader, which the holder talks to, cut off; confirmed the same way"),
        ETCD_LEADER_LOST("leader_kill", "the etcd leader killed", 19,
                         "the leader SIGKILLed and started again on its data; confirmed by the survivors following a new "
                         "leader on a later term"),
    )
    faults = {"holder_member": "etcd_partition", "leader": "etcd_partition_leader", "leader_kill": "etcd_leader_kill"}
    params = lease_params(parallel=3)

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        return faults.load(self.fault_of(variant)).applies_to(backend_cls)  # declared lock_service, never names

    def pg_sessions(self, backend_cls, profile: str) -> int:
        return 2  # the holder process's monitor and writes on the run's PostgreSQL; the contender uses the pool

    _clusters: ReadyAhead[StartedCluster] | None = None

    @contextmanager
    def trials_scope(self, services: Services, profile: str, trials: int) -> Iterator[None]:
        """Each trial's cluster started one ahead of it, and those never taken stopped at the end."""
        clusters = ReadyAhead(lambda: StartedCluster.start(services), StartedCluster.stop, trials, CLUSTERS_AHEAD)
        self._clusters = clusters
        try:
            yield
        finally:
            self._clusters = None
            clusters.close()

    def run_trial(self, env: TrialEnv) -> dict:
        asked = time.monotonic()
        started = self._clusters.take() if self._clusters is not None else StartedCluster.start(env.services)
        wait_s = time.monotonic() - asked
        cluster = started.cluster
        try:
            contender = cluster.followers()[-1]  # a follower: on the majority side of every variant
            services = replace(env.services, etcd_endpoint=contender.endpoint, embedded={Service.ETCD: cluster}, tmp=None)
            measures: dict = dict(lease_fault_trial(replace(env, services=services), self.fault_of(env.spec.variant)))
        finally:
            started.stop()
        measures["cluster_start_s"] = round(started.start_s, 2)  # the price of a cluster per trial
        measures["cluster_wait_s"] = round(wait_s, 2)  # what of it the trial waited for (started ahead: less)
        holder_token, contender_token = measures["holder"]["token"], measures["contender"]["token"]
        if measures["contender"]["acquired"] and holder_token and contender_token:  # 0: a library without one
            measures["token_increased"] = contender_token > holder_token
        return measures


@dataclass
class StartedCluster:
    """A trial's three-member cluster, up, with its folder and how long it took to start."""

    cluster: EtcdCluster
    root: Path
    start_s: float

    @classmethod
    def start(cls, services: Services) -> "StartedCluster":
        root = swept_folder(services, "etcd-cluster")
        cluster = EtcdCluster(root)
        began = time.monotonic()
        try:
            cluster.start()  # stops whatever it started if it fails
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return cls(cluster, root, time.monotonic() - began)

    def stop(self) -> None:
        self.cluster.stop()
        shutil.rmtree(self.root, ignore_errors=True)
