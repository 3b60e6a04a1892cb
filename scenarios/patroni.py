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

import copy
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

import psycopg2
from sqlalchemy import text
from sqlalchemy.engine import URL

import backends
from lab.checkers.outcomes import DoesNotRun
from lab.checkers.verdict import Verdict
from lab.columns import Column, FaultFamily
from lab.errors import LabError
from lab.errors import Interrupted, LabError
from lab.exposure import OFF, ON, Trait, when
from lab.faults import load as load_fault
from lab.faults.commanded import ONE_AT_A_TIME, CommandedFailover, CommandedFault, CommandedPartition, CommandedPause
from lab.faults.patroni import PatroniAgentPause, PatroniDcsCut, PatroniPostgresCrash, PatroniSwitchover
from lab.measures.promotion import PromotionProbe, create_probe_table
from lab.measures.promotion import connect as promotion_connect
from lab.pacing import Lane
from lab.servers.clients import pg_hosts
from lab.servers.patroni.health_router import PrimaryRouter
from lab.servers.identity import primary_identity
from lab.servers.patroni.cluster import PatroniCluster, PatroniNode, PatroniSettings
from lab.servers.patroni.runtime import Unavailable, runtime
from lab.servers.postgres.sql import dispose, trial_engines
from lab.workload.table import ensure_schema
from scenarios._failover_trial import failover_judgement, failover_trial
from scenarios._lease_faults import LeaseFaultScenario
from scenarios._shared_event import Shape, on_servers, sessions_for, shared_event
from scenarios.base import FaultReach, Skip, TrialEnv
from scenarios.events import EventEnv, EventOutcome, SubjectOutcome, trial_of_event

SETTLE_WITHIN_S = 60.0  # after the heal: the old primary demoted, rewound and streaming again
# The holder's idle_in_transaction guard outlasts every fault here (a promotion takes the ttl, 20 s): these
# columns judge Patroni, and the guard's own column is `cases`.
GUARD_S = 120.0
ROUTE_WITHIN_S = 15.0  # after a promotion, until the health-checked route leads to the new primary
REPLAYED_WITHIN_S = 30.0  # on the user's cluster, before the fault: until its standbys have replayed the grant

ASYNC, SYNC, FAILSAFE = PatroniSettings(), PatroniSettings(synchronous_mode=True), PatroniSettings(failsafe_mode=True)

# The stacks each column's fault can happen to (lab/exposure.py): Patroni with a standby to fail over to. A split
# brain needs a primary whose postgres runs on while its agent is stopped, which a watchdog would prevent; without
# synchronous_mode its commits wait for nobody.
UNDER_PATRONI = (when(Trait.HA_MANAGER, "patroni"), when(Trait.REPLICATION, "async", "sync"))
SPLIT_BRAIN = UNDER_PATRONI + (when(Trait.WATCHDOG, OFF),)
ASYNC_SPLIT_BRAIN = SPLIT_BRAIN + (when(Trait.SYNCHRONOUS_MODE, OFF), when(Trait.REPLICATION, "async"))


class Patroni(LeaseFaultScenario):
    name = "patroni"
    # A Patroni cluster of each event's own: runs beside the run's other scenarios.
    pacing = replace(LeaseFaultScenario.pacing, lane=Lane.OWN_SERVERS)
    fault_reach = FaultReach.ONE_EVENT  # one split brain (or crash, cut, switchover) serves every backend
    control = "failover"  # its scripted counterpart, which the report puts beside it
    summary = ("the lock's PostgreSQL under Patroni: its postgres crashed, its agent paused past the ttl (split "
               "brain), cut from etcd with failsafe off and on, a planned switchover")
    title = "Patroni failed over"
    breaks_leases = True
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
        Column("crash", "Patroni: the primary's postgres crashed", 13.1,
               "the primary's postmaster killed (SIGKILL); confirmed by its pid gone and a primary again, restarted "
               "in place by its agent or failed over (recorded), in Patroni's REST view and by pg_is_in_recovery()",
               family=FaultFamily.MANAGED_FAILOVER, happens_when=UNDER_PATRONI, strikes=("postgres",)),
        Column("agent_paused", "Patroni: the primary's agent paused (split brain)", 13.2,
               "the primary's Patroni agent SIGSTOPped past the ttl while its postgres runs; confirmed by state T and "
               "the replica promoted (Patroni's view from it, out of recovery on a later timeline) beside the old "
               "primary; SIGCONT after the holder's write, then the old primary is demoted and rewound (or your pause=CMD "
               "and heal=CMD on your cluster)",
               family=FaultFamily.MANAGED_FAILOVER, happens_when=ASYNC_SPLIT_BRAIN + (when(Trait.POOLER, "none"),), strikes=("postgres",)),
        Column("agent_paused_routed", "the same, clients routed by GET /primary", 13.3,
               "the same split brain with every client behind a proxy that routes new connections by each node's "
               "REST health check (GET /primary), as HAProxy does; confirmed the same way", same_fault_as="agent_paused",
               family=FaultFamily.MANAGED_FAILOVER, happens_when=ASYNC_SPLIT_BRAIN + (when(Trait.POOLER, "session", "transaction"),), strikes=("postgres",)),
        Column("agent_paused_sync", "the same under synchronous_mode", 13.4,
               "the same split brain with Patroni's synchronous_mode: the old primary's commits wait for its "
               "synchronous standby, now a primary; confirmed the same way", same_fault_as="agent_paused",
               family=FaultFamily.MANAGED_FAILOVER, happens_when=SPLIT_BRAIN + (when(Trait.SYNCHRONOUS_MODE, ON),), strikes=("postgres",)),
        Column("dcs_cut", "Patroni: the primary cut from etcd", 13.5,
               "the primary's agent cut from the DCS (its etcd link blackholed), failsafe_mode off; confirmed by the "
               "link relaying nothing and the agent's dcs_last_seen standing still; what Patroni did is recorded "
               "(here: the old primary demoted itself, then the replica was promoted); or your partition=CMD and heal=CMD",
               family=FaultFamily.MANAGED_FAILOVER, happens_when=UNDER_PATRONI + (when(Trait.FAILSAFE_MODE, OFF),), strikes=("postgres",)),
        Column("dcs_cut_failsafe", "the same with failsafe_mode", 13.6,
               "the same cut with failsafe_mode on; confirmed the same way, with what Patroni did recorded (here: the "
               "old primary still the only primary past the ttl, failsafe_mode_is_active in its REST status)", same_fault_as="dcs_cut",
               family=FaultFamily.MANAGED_FAILOVER, happens_when=UNDER_PATRONI + (when(Trait.FAILSAFE_MODE, ON),), strikes=("postgres",)),
        Column("switchover", "Patroni: a planned switchover", 13.7,
               "a planned switchover to the replica (REST POST /switchover); confirmed by Patroni naming the replica "
               "leader and its postgres out of recovery on a later timeline (or your failover=CMD)",
               family=FaultFamily.MANAGED_FAILOVER, happens_when=UNDER_PATRONI, strikes=("postgres",)),
    )
    params = {  # trials: events per variant, each serving every backend
        "quick": {"ttl_s": 1.0, "trials": 1, "parallel": 3},
        "default": {"ttl_s": 2.0, "trials": 3, "parallel": 3},
    }

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
            return EventOutcome([self._subject_on_your_servers(subject) for subject in env.subjects])
        try:  # asked here, not when planning: on the user's cluster Patroni need not run on this machine
            found = runtime()
        except Unavailable as exc:
            raise Skip(DoesNotRun(str(exc))) from None
        settings = replace(self.settings[env.event.variant], max_connections=sessions_for(len(env.subjects)))
        root = Path(tempfile.mkdtemp(prefix="patroni-", dir=env.first.services.tmp))
        root.chmod(0o755)
        cluster = PatroniCluster(root, run_server.bin, found, settings)
        try:
            cluster.start()
            return self._on_cluster(env, cluster)
        finally:
            cluster.stop()
            shutil.rmtree(root, ignore_errors=True)

    def _on_cluster(self, env: EventEnv, cluster: PatroniCluster) -> EventOutcome:
        """The event on a started cluster: its clients' route (a multi-host URL, or the REST-checked router), the
        lab's schema, the promotion probe on the old primary, then the shared event, each subject's measures told
        what the probe, the cluster and the router saw."""
        variant = env.event.variant
        old = cluster.leader()
        if old is None:
            raise LabError(f"the new Patroni cluster names no leader: {cluster.view()}")
        router = probe = monitor = writes = None
        try:
            client_url = cluster.url
            if variant in self.routed:
                router = PrimaryRouter([(n.port, _primary_check(n)) for n in cluster.nodes]).start()
                router.wait_routable()
                client_url = cluster.node_url(old).set(port=router.port)
            services = replace(env.first.services, pg_url=client_url, embedded={"postgres": cluster}, tmp=None)
            monitor, writes = trial_engines(client_url)
            ensure_schema(monitor)
            backends.prepare_storage(monitor, sorted({spec.backend for spec in env.event.subjects}))
            create_probe_table(cluster.node_url(old))
            # Connected to the old primary from before the fault, as a client already is; it writes from the fault on.
            probe = PromotionProbe(cluster.manager, old.name, {n.name: cluster.node_url(n) for n in cluster.nodes})
            with on_servers(env.subjects, services, client_url) as subjects:
                outcome = shared_event(subjects, load_fault(self.fault_of(variant)),
                                       self._shape(cluster, old, router, probe, [monitor, writes], subjects))
            probe.stop()
            survivor = cluster.leader()
            extra = {"promotion": probe.measures(None if survivor is None else cluster.node_url(survivor)),
                     "patroni": {**cluster.settings.to_json(), "nodes": len(cluster.nodes),
                                 "version": cluster.runtime.version,
                                 "clients": "REST health check (GET /primary)" if router is not None
                                 else "multi-host URL, target_session_attrs=read-write"}}
            evidence = {"probe": probe.details()}
            if router is not None:
                evidence["router"] = {"ports": {n.name: n.port for n in cluster.nodes}, "routed": list(router.routed)}
            for subject in outcome.subjects:
                if subject.measures is not None:
                    subject.measures.update(copy.deepcopy(extra))
                    subject.measures["evidence"].update(copy.deepcopy(evidence))
            return outcome
        finally:
            if probe is not None:
                probe.stop()
            dispose(monitor, writes)
            if router is not None:
                router.stop()

    def _shape(self, cluster: PatroniCluster, old: PatroniNode, router: PrimaryRouter | None, probe: PromotionProbe,
               engines: list, subjects: list[TrialEnv]) -> Shape:
        """What the event does around its holders on the lab's cluster: the replica caught up before the fault, the
        contenders' route to the new primary after it, and the cluster settled after the heal, every engine then
        started afresh so that each final table is read on the primary that survived."""

        def caught_up() -> dict:
            # The seeds, the holders' grants and the probe's table on the replica before anything strikes.
            cluster.wait_caught_up()
            return {}

        def settle() -> dict:
            return _settle(cluster, old, engines + [e for env in subjects for e in (env.monitor, env.writes)])

        def routed_to_leader() -> dict:
            # The contenders ask once their route leads to the new primary, as they would behind HAProxy.
            leader = cluster.leader(via=next(n for n in cluster.nodes if n is not old))
            if router is None or leader is None:
                return {}
            started = time.monotonic()
            router.wait_routable(ROUTE_WITHIN_S, to=leader.port)
            return {"routed_to_new_primary_after_s": round(time.monotonic() - started, 3)}

        return Shape(once_held=caught_up, at_fault=probe.start, settle=settle, guard_s=GUARD_S, retry_errors=True,
                     before_contender=routed_to_leader, monitor=engines[0])

    def _subject_on_your_servers(self, env: TrialEnv) -> SubjectOutcome:
        try:
            return SubjectOutcome(env.spec, self._on_your_servers(env))
        except Interrupted:
            raise
        except Exception as exc:  # this subject's alone, as a trial's error is
            return SubjectOutcome(env.spec, failed=exc)

    def _on_your_servers(self, env: TrialEnv) -> dict:
        """The same trial on the user's cluster with the user's own command: every client on the URL they gave, the
        grant replayed on every other host before the command, and with several hosts the promotion probe on the
        old primary (as on the lab's cluster). Verdicts come from the same checkers."""
        cls = backends.load(env.spec.backend)
        kind = self.commanded.get(env.spec.variant)
        if kind is None:
            raise Skip(self.lab_cluster_only[env.spec.variant])
        fault = kind()
        reason = fault.cannot_run(cls, env.services)
        if reason is not None:
            raise Skip(reason)
        url = env.services.pg()
        nodes = {f"{host}:{port}": url.set(host=host, port=port, query={}) for host, port in pg_hosts(url)}
        with ONE_AT_A_TIME:  # a failover of the user's service reaches every trial on it
            monitor, writes = trial_engines(url)
            probe, old = None, ""
            try:
                if len(nodes) > 1:
                    old = primary_identity(env.services, "postgres")["address"]
                    create_probe_table(nodes[old])
                    # Connected to the old primary before the fault, as a client already is.
                    probe = PromotionProbe(f"your cluster manager ({fault.hook.value} command)", old, nodes)

                def caught_up() -> dict:
                    replayed = _replayed_everywhere(nodes, old, REPLAYED_WITHIN_S)
                    if probe is not None:
                        # Started as the command is about to run, not once it has: a command may return only when its
                        # failover is done (patronictl waits for the switchover), and the window is what it measures.
                        probe.start(time.monotonic())
                    return {"standbys_replayed_s": replayed}

                def settle() -> dict:
                    dispose(monitor, writes)  # the final table is read on a fresh connection, once one primary is left
                    return {}

                measures = failover_trial(replace(env, monitor=monitor, writes=writes), fault, once_held=caught_up,
                                          settle=settle, guard_s=GUARD_S, retry_errors=True)
                if probe is not None:
                    probe.stop()
                settled, _ = fault.settle(env.services, "postgres")
                measures["evidence"].update(settled)
                if probe is not None:
                    survivor = settled.get("primary_after_heal") or measures["evidence"].get("primary_after_heal")
                    at = survivor.get("address") if isinstance(survivor, dict) else None
                    measures["promotion"] = probe.measures(nodes.get(at) if at is not None else None)
                    measures["evidence"]["probe"] = probe.details()
            finally:
                if probe is not None:
                    probe.stop()
                fault.stop_watch()
                dispose(monitor, writes)
        measures["patroni"] = {"cluster": "yours", "hosts": len(nodes),
                               "clients": "your URL" + (", several hosts" if len(nodes) > 1 else "")}
        return measures

    def judge(self, measures: dict, backend_cls) -> Verdict:
        return failover_judgement(measures, backend_cls)


def _replayed_everywhere(nodes: dict[str, URL], primary: str, within: float) -> float | None:
    """Seconds until every other host of the user's URL has replayed what the primary had written when asked (the
    holder's grant on the standby before the fault, as on the lab's cluster); None with a single host. A host that
    does not catch up within the bound makes the trial an error: the fault would test the lag instead."""
    if len(nodes) < 2:
        return None
    started = time.monotonic()
    target = _ask(nodes[primary], "select pg_current_wal_lsn()::text")
    for address, node in nodes.items():
        said = "no answer"
        while address != primary:
            try:
                behind = _ask(node, "select pg_wal_lsn_diff(%s, pg_last_wal_replay_lsn())", (target,))
            except psycopg2.Error as exc:  # a standby restarting: asked again until the bound
                behind, said = None, type(exc).__name__
            if behind is not None and behind <= 0:
                break
            said = said if behind is None else f"{behind} bytes behind"
            if time.monotonic() - started > within:
                raise LabError(f"{address} did not replay the primary's WAL within {within:.0f} s ({said})")
            time.sleep(0.05)  # nothing announces a replay to a client: ask again
    return round(time.monotonic() - started, 3)


def _ask(url: URL, query: str, args: tuple = ()):
    """One value from one host, on a session of its own."""
    conn = promotion_connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(query, args)
            row = cur.fetchone()
    finally:
        conn.close()
    return None if row is None else row[0]


def _primary_check(node: PatroniNode) -> Callable[[], bool]:
    """The health check HAProxy runs against a Patroni node: its REST API's GET /primary answers 200."""
    return lambda: node.rest("/primary")[0] == 200


def _settle(cluster: PatroniCluster, old: PatroniNode, engines: list) -> dict:
    """After the heal: until exactly one postgres is out of recovery and Patroni names it leader (else the trial
    cannot say which table is the final one: an error), then, within SETTLE_WITHIN_S, the old primary back as a
    replica. Records how long, whether the old primary was rewound (its agent's log), and both views."""
    started = time.monotonic()
    deadline = started + SETTLE_WITHIN_S
    views: dict = {}
    while time.monotonic() < deadline:
        servers = cluster.servers_view()
        primaries = [name for name, state in servers.items() if state.get("in_recovery") is False]
        leader = cluster.leader(via=cluster.node(primaries[0])) if len(primaries) == 1 else None
        views = {"patroni": cluster.view(), "servers": servers}
        if leader is not None and leader.name == primaries[0]:
            break
        time.sleep(0.2)
    else:
        raise LabError(f"the Patroni cluster did not settle on one primary within {SETTLE_WITHIN_S:.0f} s: {views}")
    one_primary_s = round(time.monotonic() - started, 3)
    try:
        views = cluster.wait_healthy(max(1.0, deadline - time.monotonic()))
        rejoined = True
    except LabError:
        rejoined = False
    for engine in engines:
        engine.dispose()  # the final table is read on a fresh connection to the primary that survived
    return {"settled": {"one_primary_s": one_primary_s, "old_primary_rejoined": rejoined,
                        "rejoined_s": round(time.monotonic() - started, 3) if rejoined else None,
                        "old_primary_rewound": "pg_rewind" in _log_text(old.log_path), "after": views}}


def _log_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
