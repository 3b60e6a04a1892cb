"""The lock's Redis failed over by Sentinel mid-hold: the primary paused, the primary cut off, a failover forced.

One failover serves every lock on that Redis (FaultReach.ONE_EVENT): each event gets a primary, a replica and
three Sentinels (quorum 2) of its own (lab/servers/sentinel/cluster.py), and a PostgreSQL of its own for the companies'
writes (so it runs beside the scenarios on the run's servers), and every lock client, the holders' and the
contenders', finds the primary through the Sentinels (a redis+sentinel:// address, which each backend's client
reads: redis-py's Sentinel.master_for, or the library's own Sentinel support). The event is the failover shape
(scenarios/_shared_event.py): every holder takes its lock, on keys, a table and a company of its own, and stops
at its fault point with the replica caught up; the fault strikes once and Sentinel fails over (confirmed by
+switch-master, a majority of Sentinels naming the replica, and its ROLE); each contender asks where the
Sentinels now point; the fault heals and the holders go on; then the event waits until the Sentinels have taken
the old primary back as a replica (an event that does not get there makes each subject an error). Each backend's
trial is judged on its own history. The promotion measures run from the fault to that moment: when the replica answered
as a primary, and what a probe writing straight to the old primary got acknowledged meanwhile.

Variants (the settings of each trial in its measures' "sentinel"):
- primary_paused: the primary SIGSTOPped past down-after-milliseconds until Sentinel fails over, then
  SIGCONTed: it comes back believing it is the primary, with the holder's connection still open to it.
- primary_cut: the primary cut from the Sentinels and its replica but not from its clients, past the
  contender's try, then healed: the stale-master window, a primary that answers as one to the holder
  while the Sentinels have another.
- both again with min-replicas-to-write 1 on both servers (min-replicas-max-lag 1): a primary without a
  replica refuses writes. With one replica that holds for the new primary too, until the old one rejoins.
- forced: SENTINEL FAILOVER with every server up (an operator's, or a planned, failover).

On servers the lab did not start (`--redis-url redis+sentinel://...`, or a plain redis:// one behind which
something else fails over) the same trials run with the user's own commands: `--fault-command pause=CMD`
(with heal=CMD), partition=CMD (with heal=CMD), failover=CMD, confirmed over the servers' own protocols
(lab/faults/commanded.py), one trial at a time since a failover reaches every client of the service. The
min-replicas variants set the servers' configuration themselves, so they stay on the lab's own servers.
"""

from __future__ import annotations

import copy
import shutil
import time
from dataclasses import replace

import backends
from lab import faults
from lab.checkers.outcomes import DoesNotRun, NotRun
from lab.checkers.verdict import Verdict
from lab.declarations.columns import FaultFamily
from lab.stack.exposure import OFF, ON, YES, Trait, when
from lab.faults.commanded import ONE_AT_A_TIME, CommandedFailover, CommandedFault, CommandedPartition, CommandedPause
from lab.faults.sentinel import SentinelFault, SentinelForcedFailover, SentinelPartition, SentinelPause
from lab.declarations.pacing import Lane
from lab.servers.clients import parse_pg_dsn
from lab.servers.postgres.server import EmbeddedPostgres
from lab.servers.postgres.sql import dispose, trial_engines
from lab.servers.sentinel.cluster import SENTINELS, SentinelRedis, SentinelSettings
from lab.declarations.where import Service
from lab.workload.table import ensure_schema
from scenarios._column_kinds import ColumnKind
from scenarios._failover_trial import failover_judgement, failover_trial
from scenarios._lease_faults import LeaseFaultScenario, lease_params
from scenarios._shared_event import Shape, on_servers, sessions_for, shared_event
from scenarios._trial_folders import swept_folder
from scenarios._your_servers import commanded_fault, each_in_turn
from scenarios.base import FaultReach, Skip, TrialEnv
from scenarios.events import EventEnv, EventOutcome, SubjectOutcome, trial_of_event

MIN_REPLICAS = "_min1"


# The stacks each column's fault can happen to (lab/stack/exposure.py): a Redis that Sentinel watches; the min1 columns are
# the same faults where the servers refuse writes without a replica (min-replicas-to-write).
WATCHED_BY_SENTINEL, ON_REDIS = (when(Trait.REDIS_SENTINEL, YES),), (Service.REDIS,)


# Its columns: a failover by Sentinel on a Redis it watches.
SENTINEL_FAILOVER = ColumnKind(FaultFamily.MANAGED_FAILOVER, WATCHED_BY_SENTINEL, ON_REDIS)


def typed_refusal(reason: str) -> str:
    """A library's refusal of the Sentinels' address, as its cell says it: the backend's own type (a lab limit it
    declares is *not run*), else *does not run* (a library without Sentinel support, like a missing package), never
    n/a: the failover would reach its lock."""
    return reason if isinstance(reason, (NotRun, DoesNotRun)) else DoesNotRun(reason)


class Sentinel(LeaseFaultScenario):
    name = "sentinel"
    # Each event's servers are its own, a PostgreSQL for its writes included.
    pacing = replace(LeaseFaultScenario.pacing, lane=Lane.OWN_SERVERS)
    fault_reach = FaultReach.ONE_EVENT  # one Sentinel failover serves every lock on that Redis
    control = "redis_failover"  # the scripted failover the report sets it beside
    summary = ("the lock's Redis failed over by three Sentinels mid-hold: primary paused, primary cut off (the "
               "stale-master window), with and without min-replicas-to-write, a failover forced")
    title = "Redis failed over by Sentinel"
    replicated = True
    columns = (
        SENTINEL_FAILOVER("primary_paused", "Redis primary paused, Sentinel failed over", 16.1,
                          "the primary SIGSTOPped past down-after-milliseconds until three Sentinels (quorum 2) fail over to "
                          "its replica, then SIGCONTed (or your pause=CMD and heal=CMD); confirmed by +switch-master, a "
                          "majority of Sentinels naming the replica and its ROLE master, and the old primary demoted at the end",
                          also=(when(Trait.REDIS_MIN_REPLICAS_TO_WRITE, OFF),)),
        SENTINEL_FAILOVER("primary_paused_min1", "Redis primary paused, Sentinel failed over, min-replicas-to-write 1", 16.2,
                          "the same with min-replicas-to-write 1 on both servers; confirmed the same way", same_fault_as="primary_paused",
                          also=(when(Trait.REDIS_MIN_REPLICAS_TO_WRITE, ON),)),
        SENTINEL_FAILOVER("primary_cut", "Redis primary cut from the Sentinels and its replica (stale master)", 16.3,
                          "the primary cut from the Sentinels and its replica but not from its clients until Sentinel fails "
                          "over and the contender has tried, then healed (or your partition=CMD and heal=CMD); confirmed the "
                          "same way, with the old primary still answering ROLE master",
                          also=(when(Trait.REDIS_MIN_REPLICAS_TO_WRITE, OFF),)),
        SENTINEL_FAILOVER("primary_cut_min1", "Redis primary cut off (stale master), min-replicas-to-write 1", 16.4,
                          "the same with min-replicas-to-write 1 on both servers; confirmed the same way", same_fault_as="primary_cut",
                          also=(when(Trait.REDIS_MIN_REPLICAS_TO_WRITE, ON),)),
        SENTINEL_FAILOVER("forced", "Redis failover forced through Sentinel", 16.5,
                          "SENTINEL FAILOVER with every server up (or your failover=CMD); confirmed the same way"),
    )
    fault = SentinelPause
    faults = {"primary_paused": SentinelPause, "primary_paused_min1": SentinelPause,
              "primary_cut": SentinelPartition, "primary_cut_min1": SentinelPartition,
              "forced": SentinelForcedFailover}
    commanded: dict[str, type[CommandedFault]] = {"primary_paused": CommandedPause, "primary_cut": CommandedPartition,
                                                  "forced": CommandedFailover}
    params = lease_params(parallel=3)  # trials: events per variant, each serving every backend

    def pg_sessions(self, backend_cls, profile: str) -> int:
        return 0  # the writes go to the trial's own PostgreSQL (on your servers: to yours, one trial at a time)

    def trial_seconds(self, profile: str) -> float:
        """One event: starting a PostgreSQL and five Redis processes (~4 s), the failover (~2 s), two TTLs, and the
        old primary's demotion (Sentinel waits ~8 s after it is reachable again)."""
        ttl = self.profile_params(profile)["ttl_s"]
        return 4.0 + 2.0 + 2 * ttl + 10.0 + 2.0

    def run_trial(self, env: TrialEnv) -> dict:
        return trial_of_event(self, env)

    def run_event(self, env: EventEnv) -> EventOutcome:
        """One event on servers of its own for every subject; on the user's service, each subject in turn with the
        user's own command (a failover of their service reaches every client: one at a time)."""
        first = env.first
        if not first.services.is_embedded(Service.REDIS):
            return each_in_turn(env.subjects, self._on_your_servers)
        variant = env.event.variant
        settings = SentinelSettings(min_replicas_to_write=1 if variant.endswith(MIN_REPLICAS) else 0)
        root = swept_folder(first.services, "sentinel")
        root.chmod(0o755)  # the PostgreSQL's user reaches its data dir; the Redis part is a 0700 folder inside
        run_pg = first.services.embedded.get("postgres")
        pg = EmbeddedPostgres(root, bin_dir=run_pg.bin if isinstance(run_pg, EmbeddedPostgres) else None,
                              settings={"shared_buffers": "16MB"}, max_connections=sessions_for(len(env.subjects)))
        servers = SentinelRedis(root / Service.REDIS, settings)
        fault = faults.load(self.fault_of(variant))
        assert isinstance(fault, SentinelFault)  # every variant's fault is one
        try:
            started = time.monotonic()
            pg.start()
            servers.start()
            start_s = time.monotonic() - started
            outcome = self._on_servers(env, pg, servers, fault)
            # until the Sentinels take the old primary back; nothing to wait for when no subject could run here
            settled, promotion = fault.settle(servers) if outcome.evidence else ({}, {})
        finally:
            fault.stop_watch()
            servers.stop()
            pg.stop()
            shutil.rmtree(root, ignore_errors=True)
        extra = {"promotion": promotion, "sentinel": {**settings.as_dict(), "version": servers.version,
                                                      "sentinels": SENTINELS, "replicas": 1, "start_s": round(start_s, 2)}}
        for subject in outcome.subjects:
            if subject.measures is not None:
                subject.measures["evidence"].update(copy.deepcopy(settled))
                subject.measures.update(copy.deepcopy(extra))
        return outcome

    def _on_servers(self, env: EventEnv, pg: EmbeddedPostgres, servers: SentinelRedis,
                    fault: SentinelFault) -> EventOutcome:
        """The shared event on started servers: the lab's schema on the event's PostgreSQL, each subject's lock
        asked whether it can work through the Sentinels (a library without Sentinel support does not run: that
        subject alone), then one failover for the others."""
        monitor = writes = None
        try:
            monitor, writes = trial_engines(pg.dsn)
            ensure_schema(monitor)
            backends.prepare_storage(monitor, sorted({spec.backend for spec in env.event.subjects}))
            url = parse_pg_dsn(pg.dsn)
            services = replace(env.first.services, pg_url=url, redis_url=servers.url, embedded={Service.REDIS: servers},
                               tmp=None)
            refused = {e.spec.id: typed_refusal(reason) for e in env.subjects
                       if (reason := backends.load(e.spec.backend).cannot_run(services)) is not None}

            def caught_up() -> dict:
                servers.wait_in_sync()  # the grants (and a fence's counters) are on the replica before the fault
                return {"replica_caught_up_before_fault": True}

            ran: dict[str, SubjectOutcome] = {}
            runnable = [e for e in env.subjects if e.spec.id not in refused]
            if runnable:
                # The contenders ask through the new primary's errors (NOREPLICAS while it has no replica).
                with on_servers(runnable, services, url) as subjects:
                    shared = shared_event(subjects, fault, Shape(once_held=caught_up, retry_errors=True,
                                                                  monitor=monitor))
                ran = {o.spec.id: o for o in shared.subjects}
            return EventOutcome([ran.get(e.spec.id) or SubjectOutcome(e.spec, failed=Skip(refused[e.spec.id]))
                                 for e in env.subjects], evidence=shared.evidence if runnable else {})
        finally:
            dispose(monitor, writes)

    def _on_your_servers(self, env: TrialEnv) -> dict:
        """The same trial on the user's service, with the user's own commands."""
        cls = backends.load(env.spec.backend)
        fault = commanded_fault(env, self.commanded, "it sets min-replicas-to-write on servers the lab started; yours "
                                                     "run with your own setting, in the column without it")
        with ONE_AT_A_TIME:  # a failover of the user's service reaches every trial on it
            try:
                measures = failover_trial(env, fault, retry_errors=True)
                settled, promotion = fault.settle(env.services, cls.lock_service)
            finally:
                fault.stop_watch()
        measures["evidence"].update(settled)
        if promotion is not None:
            measures["promotion"] = promotion
        return measures

    def judge(self, measures: dict, backend_cls) -> Verdict:
        return failover_judgement(measures, backend_cls)
