"""The lock's Redis failed over by hand: its replica promoted with REPLICAOF NO ONE, the old primary cut off.

It strikes a primary/replica pair the lab started (lab/servers/redis/replica.py). confirm() proves
the replica now answers as a primary and records which keys the old primary had that the new
one lacks: a lock key among them is a grant the failover forgot. From the injection a PromotionWatch
records how long the promotion took and what the old primary, never demoted, went on acknowledging:
the scripted control the Sentinel failover is set beside.
"""

from __future__ import annotations

import time

from lab.faults.base import Fault, FaultNotConfirmed, Target
from lab.servers.abilities import PromotesReplica
from lab.servers.redis.promotion import PromotionWatch, answers_master, straight_to


class RedisFailover(Fault):
    strikes = "redis"
    name = "redis_failover"
    label = "Redis failed over to its replica"
    needs_server = PromotesReplica
    no_server = "a Redis failover needs a primary and a replica the lab started; it never fails over yours"

    def __init__(self) -> None:
        self.watch: PromotionWatch | None = None  # the promotion measures, from the injection to the trial's end


    def inject(self, target: Target) -> None:
        pair = target.services.embedded["redis"]
        self.watch = PromotionWatch("scripted", old_primary=lambda: straight_to(pair.primary.url),
                                    promoted=lambda: answers_master(pair.replica.url), key_prefix="locklab:probe")
        self.watch.start(time.monotonic())
        if not pair.link.blackholed:
            pair.hold_back()  # the primary is cut off from its replica, as a partition would
        target.evidence["offsets_at_failover"] = pair.offsets()
        target.evidence["missing_on_new_primary"] = pair.missing_on_replica()
        target.evidence["role_after"] = pair.promote()
        self.watch.struck()  # the old primary is cut off and the replica promoted: count what it still takes

    def confirm(self, target: Target) -> dict:
        role = target.evidence.get("role_after")
        if role != "master":
            raise FaultNotConfirmed(f"after REPLICAOF NO ONE the replica reports role {role!r}")
        return {"fault": self.name, "new_primary_role": role, **target.evidence["offsets_at_failover"],
                "missing_on_new_primary": target.evidence["missing_on_new_primary"]}
