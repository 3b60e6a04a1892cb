"""The lock's PostgreSQL managed by Patroni, as production runs it, while a holder holds: what survives.

One fault event serves every backend (FaultReach.ONE_EVENT, scenarios/_shared_event.py): each event gets a
Patroni cluster of its own (lab/servers/patroni/cluster.py: two nodes, one etcd member as the DCS, the run's PostgreSQL
binaries), and the same shape as the scripted `failover`, its control: every backend's holder takes its lock (on
a company, a table and keys of its own; a lock on Redis, etcd or ZooKeeper on the run's own server, its fence and
writes on the cluster) and stops at its fault point; the fault strikes once (lab/faults/patroni.py) and is
confirmed by Patroni's view and the servers'; each contender asks once a new primary answers; each holder goes on
and writes; then the fault heals, Patroni settles the cluster (a demoted primary rewound by pg_rewind), and each
company is read on the primary that survived. Each backend's trial is judged on its own history. A probe client
writes to the old primary from the moment of the fault (lab/measures/promotion.py), so every trial records, as
the scripted control does, how long the promotion took and what the old primary accepted.

Clients reach the cluster as libpq users do, with one multi-host URL and target_session_attrs=read-write:
libpq takes the first node, in the URL's order, that accepts writes, and the old primary (node0) is
listed first. During a split brain both nodes accept writes, so such clients stay with the old primary.
The `agent_paused_routed` column routes every client instead through a proxy that asks each node's
Patroni REST API `GET /primary`, as HAProxy does in Patroni's reference setup: a stopped agent answers
nothing, so new connections go to the new primary while those already open stay on the old one.

Variants (columns):
- crash: the primary's postmaster killed; Patroni restarts it in place (it still holds the leader key,
  primary_start_timeout 300 s) or fails over, and the trial records which.
- agent_paused: the primary's agent SIGSTOPped past the ttl (20 s): the replica promotes while the old
  postgres still accepts writes; on SIGCONT the old agent demotes and rewinds it. Asynchronous replication.
- agent_paused_routed: the same, clients routed by the REST health check.
- agent_paused_sync: the same under synchronous_mode: the old primary's commits wait for a standby that is
  now a primary, so nothing it acknowledges is lost. synchronous_mode_strict behaved the same here (the old
  primary's writes waited from the promotion on, none was lost) and is left out: strict differs only when
  no synchronous standby is left, which none of these faults does to the old primary.
- dcs_cut: the primary's agent cut from etcd, failsafe_mode off: it demotes its postgres within
  loop_wait + retry_timeout, and the replica promotes once the leader key expires (no primary between).
- dcs_cut_failsafe: the same with failsafe_mode on: the primary stays primary while the replica answers it.
- switchover: a planned switchover (REST `POST /switchover`, as patronictl asks it).

On a PostgreSQL the lab did not start (`--pg-dsn`, best a multi-host URL with target_session_attrs=read-write,
as Patroni's users connect) the lab never acts on the cluster itself: agent_paused runs the user's pause=CMD
(with heal=CMD), dcs_cut their partition=CMD (with heal=CMD) and switchover their failover=CMD, each confirmed
over the servers' own protocols (lab/faults/commanded.py), one trial at a time since a failover reaches every
client of the service. With several hosts in the URL the same probe measures the promotion. The variants that
set the cluster's own settings (synchronous_mode, failsafe_mode) or put the lab's router in front of it stay on
the lab's cluster, and a crash, which Patroni may repair in place, is the `restart` scenario's.
"""

from __future__ import annotations

import shutil
from dataclasses import replace

from lab.declarations.capabilities import Capability
from lab.checkers.outcomes import DoesNotRun
from lab.checkers.verdict import Verdict
from lab.declarations.columns import FaultFamily
from lab.stack.exposure import OFF, ON, Trait, when
from lab.faults.commanded import CommandedFailover, CommandedFault, CommandedPartition, CommandedPause
from lab.faults.patroni import PatroniAgentPause, PatroniDcsCut, PatroniPostgresCrash, PatroniSwitchover
from lab.declarations.pacing import Lane
from lab.servers.patroni.cluster import PatroniCluster, PatroniSettings
from lab.servers.patroni.runtime import Unavailable, runtime
from lab.stack.description import PoolMode
from scenarios._column_kinds import ColumnKind
from scenarios._failover_trial import failover_judgement
from scenarios._lease_faults import LeaseFaultScenario, lease_params
from scenarios._patroni_cluster import on_cluster
from scenarios._patroni_yours import on_your_cluster
from scenarios._shared_event import sessions_for
from scenarios._trial_folders import shared_folder
from scenarios._your_servers import commanded_fault, each_in_turn
from scenarios.base import FaultReach, Skip, TrialEnv
from scenarios.events import EventEnv, EventOutcome, trial_of_event

ASYNC, SYNC, FAILSAFE = PatroniSettings(), PatroniSettings(synchronous_mode=True), PatroniSettings(failsafe_mode=True)
# The rights that live in the primary's own sessions and transactions (a lease has a TTL of its own that a long
# event can outlast, so it is not among them).
IN_THE_PRIMARYS_SESSIONS = (Capability.SESSION_LOCK, Capability.IN_TRANSACTION, Capability.SERIALIZABLE,
                            Capability.NATURAL_KEY, Capability.QUEUE, Capability.UNIQUE_MARKER,
                            Capability.PARENT_ROW_LOCK)

# The stacks each column's fault can happen to (lab/stack/exposure.py): Patroni with a standby to fail over to. A split
# brain needs a primary whose postgres runs on while its agent is stopped, which a watchdog would prevent; without
# synchronous_mode its commits wait for nobody.
UNDER_PATRONI = (when(Trait.HA_MANAGER, "patroni"), when(Trait.REPLICATION, "async", "sync"))
SPLIT_BRAIN = UNDER_PATRONI + (when(Trait.WATCHDOG, OFF),)
ASYNC_SPLIT_BRAIN = SPLIT_BRAIN + (when(Trait.SYNCHRONOUS_MODE, OFF), when(Trait.REPLICATION, "async"))


# Its columns: a PostgreSQL under Patroni, each under its conditions.
PATRONI_FAILOVER = ColumnKind(FaultFamily.MANAGED_FAILOVER, strikes=("postgres",))


class Patroni(LeaseFaultScenario):
    name = "patroni"
    # A Patroni cluster of each event's own: runs beside the run's other scenarios.
    pacing = replace(LeaseFaultScenario.pacing, lane=Lane.OWN_SERVERS)
    fault_reach = FaultReach.ONE_EVENT  # one split brain (or crash, cut, switchover) serves every backend
    control = "failover"  # its scripted counterpart, which the report puts beside it
    summary = ("the lock's PostgreSQL under Patroni: its postgres crashed, its agent paused past the ttl (split "
               "brain), cut from etcd with failsafe off and on, a planned switchover")
    title = "Patroni failed over"
    replicated = True
    fault = PatroniAgentPause
    faults = {"crash": PatroniPostgresCrash, "agent_paused": PatroniAgentPause,
              "agent_paused_routed": PatroniAgentPause, "agent_paused_sync": PatroniAgentPause,
              "dcs_cut": PatroniDcsCut, "dcs_cut_failsafe": PatroniDcsCut, "switchover": PatroniSwitchover}
    settings = {"crash": ASYNC, "agent_paused": ASYNC, "agent_paused_routed": ASYNC, "agent_paused_sync": SYNC,
                "dcs_cut": ASYNC, "dcs_cut_failsafe": FAILSAFE, "switchover": ASYNC}
    routed = frozenset({"agent_paused_routed"})
    commanded: dict[str, type[CommandedFault]] = {"agent_paused": CommandedPause, "dcs_cut": CommandedPartition,
                                                  "switchover": CommandedFailover}
    # Why the other variants do not run on the user's cluster (the cell's reason).
    lab_cluster_only = {
        "crash": "a crashed postgres may be restarted in place by Patroni, which no new primary confirms: on your "
                 "servers it is the restart scenario's (--fault-command restart=CMD)",
        "agent_paused_routed": "it puts the lab's own GET /primary router in front of a cluster the lab started; give "
                               "your router's address (HAProxy) as the DSN and agent_paused runs through it",
        "agent_paused_sync": "it turns synchronous_mode on in a cluster the lab started; yours runs with its own "
                             "setting, in the column agent_paused",
        "dcs_cut_failsafe": "it turns failsafe_mode on in a cluster the lab started; yours runs with its own setting, "
                            "in the column dcs_cut",
    }
    columns = (
        PATRONI_FAILOVER("crash", "Patroni: the primary's postgres crashed", 13.1,
                         "the primary's postmaster killed (SIGKILL); confirmed by its pid gone and a primary again, restarted "
                         "in place by its agent or failed over (recorded), in Patroni's REST view and by pg_is_in_recovery()",
                         also=UNDER_PATRONI),
        PATRONI_FAILOVER("agent_paused", "Patroni: the primary's agent paused (split brain)", 13.2,
                         "the primary's Patroni agent SIGSTOPped past the ttl while its postgres runs; confirmed by state T and "
                         "the replica promoted (Patroni's view from it, out of recovery on a later timeline) beside the old "
                         "primary; SIGCONT after the holder's write, then the old primary is demoted and rewound (or your pause=CMD "
                         "and heal=CMD on your cluster)",
                         also=ASYNC_SPLIT_BRAIN + (when(Trait.POOLER, PoolMode.NONE.value),)),
        PATRONI_FAILOVER("agent_paused_routed", "the same, clients routed by GET /primary", 13.3,
                         "the same split brain with every client behind a proxy that routes new connections by each node's "
                         "REST health check (GET /primary), as HAProxy does; confirmed the same way", same_fault_as="agent_paused",
                         also=ASYNC_SPLIT_BRAIN + (when(Trait.POOLER, PoolMode.SESSION.value, PoolMode.TRANSACTION.value),)),
        PATRONI_FAILOVER("agent_paused_sync", "the same under synchronous_mode", 13.4,
                         "the same split brain with Patroni's synchronous_mode: the old primary's commits wait for its "
                         "synchronous standby, now a primary; confirmed the same way", same_fault_as="agent_paused",
                         also=SPLIT_BRAIN + (when(Trait.SYNCHRONOUS_MODE, ON),)),
        PATRONI_FAILOVER("dcs_cut", "Patroni: the primary cut from etcd", 13.5,
                         "the primary's agent cut from the DCS (its etcd link blackholed), failsafe_mode off; confirmed by the "
                         "link relaying nothing and the agent's dcs_last_seen standing still; what Patroni did is recorded "
                         "(here: the old primary demoted itself, then the replica was promoted); or your partition=CMD and heal=CMD",
                         also=UNDER_PATRONI + (when(Trait.FAILSAFE_MODE, OFF),)),
        PATRONI_FAILOVER("dcs_cut_failsafe", "the same with failsafe_mode", 13.6,
                         "the same cut with failsafe_mode on; confirmed the same way, with what Patroni did recorded (here: the "
                         "old primary still the only primary past the ttl, failsafe_mode_is_active in its REST status)", same_fault_as="dcs_cut",
                         also=UNDER_PATRONI + (when(Trait.FAILSAFE_MODE, ON),),
                         cannot_take=IN_THE_PRIMARYS_SESSIONS,
                         cannot_take_why="failsafe_mode keeps the primary running while it reaches its replica, so none "
                                         "of its sessions or transactions ends"),
        PATRONI_FAILOVER("switchover", "Patroni: a planned switchover", 13.7,
                         "a planned switchover to the replica (REST POST /switchover); confirmed by Patroni naming the replica "
                         "leader and its postgres out of recovery on a later timeline (or your failover=CMD)",
                         also=UNDER_PATRONI),
    )
    params = lease_params(parallel=3)  # trials: events per variant, each serving every backend

    def pg_sessions(self, backend_cls, profile: str) -> int:
        return 0  # every session of a trial is on the trial's own cluster

    def trial_seconds(self, profile: str) -> float:
        """One event: a cluster's start (about 10 s), every holder's grant, a promotion past the ttl (20 s), the
        contenders, the heal and settling (28 to 92 s, 60 s typical, for 36 subjects here, three events at once)."""
        return 60.0

    def run_trial(self, env: TrialEnv) -> dict:
        return trial_of_event(self, env)

    def run_event(self, env: EventEnv) -> EventOutcome:
        """One event on a Patroni cluster of its own for every subject; on the user's cluster, each subject in turn
        with the user's own command (a failover of their service reaches every client: one at a time)."""
        run_server = env.first.services.embedded.get("postgres")
        if run_server is None:
            return each_in_turn(env.subjects, self._on_your_cluster)
        try:  # asked here, not when planning: on the user's cluster Patroni need not run on this machine
            found = runtime()
        except Unavailable as exc:
            raise Skip(DoesNotRun(str(exc))) from None
        settings = replace(self.settings[env.event.variant], max_connections=sessions_for(len(env.subjects)))
        root = shared_folder(env.first.services.tmp, "patroni-")
        cluster = PatroniCluster(root, run_server.bin, found, settings)
        try:
            cluster.start()
            return on_cluster(env, cluster, self.fault_of(env.event.variant), env.event.variant in self.routed)
        finally:
            cluster.stop()
            shutil.rmtree(root, ignore_errors=True)

    def _on_your_cluster(self, env: TrialEnv) -> dict:
        """The trial on the user's cluster, with their command for its variant (scenarios/_patroni_yours.py)."""
        lab_only = self.lab_cluster_only.get(env.spec.variant, "")  # why a variant without a command does not run
        return on_your_cluster(env, commanded_fault(env, self.commanded, lab_only))

    def judge(self, measures: dict, backend_cls) -> Verdict:
        return failover_judgement(measures, backend_cls)
