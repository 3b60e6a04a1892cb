"""The lock's Redis fails over to its replica mid-hold, the old primary cut off with the holder on its side.

Each trial gets a primary and a replica of its own (lab/servers/redis/replica.py). The holder
takes its lock on the primary and stops at its fault point; the primary is cut off from the
replica, the replica promoted (lab/faults/redis_failover.py), and a contender asks the new primary,
as a Sentinel-aware client would after the failover. The holder's client stays on the old primary.

Variants:
- caught_up: the replica had every byte, the lock key included, when the primary was cut off.
- behind: the link was cut before the holder asked, so the replica never got the key (confirmed
  before the failover): Redis' asynchronous replication window, made certain.
- behind_wait: the same, with the holder's lock waiting for one replica to acknowledge its grant
  (Redis WAIT) before it believes it; only locks that can (capability replica_ack). The contender
  does not wait: after the failover its new primary has no replica left to answer a WAIT, so a
  contender that waited could not take the lock at all until a replica joined.
"""

from __future__ import annotations

import shutil
from dataclasses import replace

from lab import faults
from lab.declarations.capabilities import Capability
from lab.checkers.verdict import Verdict
from lab.declarations.columns import Column, FaultFamily
from lab.stack.exposure import YES, Trait, when
from lab.faults import FaultNotConfirmed
from lab.faults.redis_failover import RedisFailover as RedisFailoverFault
from lab.holder.process import HolderProcess
from lab.servers.redis.promotion import straight_to
from lab.servers.redis.replica import RedisWithReplica
from lab.declarations.where import Service
from scenarios._failover_trial import GRANT_WITHIN_S, failover_trial, failover_judgement
from scenarios._lease_faults import LeaseFaultScenario, lease_params
from scenarios._trial_folders import servers_folder
from scenarios.base import TrialEnv


class RedisFailover(LeaseFaultScenario):
    name = "redis_failover"
    summary = "the lock's Redis failed over to its replica (REPLICAOF NO ONE) with the holder on the old primary"
    title = "Redis failed over"
    replicated = True
    columns = (
        Column("caught_up", "Redis failed over, replica caught up", 14,
               "the primary cut off and its replica promoted with REPLICAOF NO ONE once it has the lock key; "
               "confirmed by the replica answering as a primary",
               family=FaultFamily.FAILOVER, happens_when=(when(Trait.REDIS_REPLICAS, YES),), strikes=(Service.REDIS,)),
        Column("behind", "Redis failed over, replica behind", 15,
               "the same with the replica held behind, so the lock key never reached it; confirmed the same way,"
               " with the keys the new primary lacks",
               family=FaultFamily.FAILOVER, happens_when=(when(Trait.REDIS_REPLICAS, YES),), strikes=(Service.REDIS,),
               spared_by=(Capability.CONNECTION_HELD,)),  # a grant that is no write: nothing to be behind on
        Column("behind_wait", "Redis failed over, replica behind, WAIT 1", 16,
               "the same with a lock that takes a grant only once a replica has it (WAIT 1); confirmed the same "
               "way", same_fault_as="behind",
               family=FaultFamily.FAILOVER, happens_when=(when(Trait.REDIS_REPLICAS, YES),), strikes=(Service.REDIS,),
               needs=(Capability.REPLICA_ACK,)),  # the configuration of a lock that can wait for a replica
    )
    params = lease_params(parallel=4)

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        reason = faults.load(self.fault).applies_to(backend_cls)
        if reason is None and variant == "behind_wait" and Capability.REPLICA_ACK not in backend_cls.capabilities:
            reason = "its library has no way to wait for a replica's acknowledgement (Redis WAIT)"
        if reason is None and variant == "behind" and Capability.CONNECTION_HELD in backend_cls.capabilities:
            reason = ("its lock is a subscription on the primary's connection, not a key: no write for the replica "
                      "to be held behind on")
        return reason

    def pg_sessions(self, backend_cls, profile: str) -> int:
        return 2  # the runs' writes and the observer, on the run's PostgreSQL

    def run_trial(self, env: TrialEnv) -> dict:
        root = servers_folder(env.services, "redis-failover-", RedisFailoverFault.no_server)
        pair = RedisWithReplica(root)
        variant = env.spec.variant
        fault: RedisFailoverFault | None = None
        try:
            pair.start()
            servers = replace(env.services, redis_url=pair.primary.url, embedded={Service.REDIS: pair}, tmp=None)
            new_primary = replace(servers, redis_url=pair.replica.url, embedded={})

            def before_holder() -> dict:
                return {"link_carried_before_cut": pair.hold_back()} if variant.startswith("behind") else {}

            def once_held() -> dict:
                if variant == "caught_up":
                    pair.wait_in_sync()
                    missing = pair.missing_on_replica()
                    if missing:
                        raise FaultNotConfirmed(f"the replica lacks {missing} although it caught up")
                    return {"link_carried_before_cut": pair.hold_back()}
                missing = pair.missing_on_replica()
                if not missing:
                    raise FaultNotConfirmed("the replica has every key the primary has: the link was not held back")
                return {"replica_lacked": missing}

            fault = RedisFailoverFault()
            measures = failover_trial(replace(env, services=servers), fault,
                                      contender_services=new_primary, before_holder=before_holder, once_held=once_held,
                                      grant=_grant_or_given_back,
                                      holder_options={"wait_replicas": 1} if variant == "behind_wait" else None)
            if fault.watch is not None:  # the trial has ended: what the never-demoted old primary accepted until then
                measures["promotion"] = fault.watch.result(lambda: straight_to(pair.replica.url, 5.0))
            return measures
        finally:
            if fault is not None and fault.watch is not None:
                fault.watch.stop()
            pair.stop()
            shutil.rmtree(root, ignore_errors=True)

    def judge(self, measures: dict, backend_cls) -> Verdict:
        return failover_judgement(measures, backend_cls)


def _grant_or_given_back(holder: HolderProcess, within: float = GRANT_WITHIN_S) -> tuple[dict | None, dict | None]:
    """The holder's acquire event, or, when its lock gave a grant back because no replica had it, what it said."""
    event = holder.wait_for("acquire", within)
    if not event["granted"] and event.get("note"):
        return None, {"given_back": event["note"]}
    return event, None
