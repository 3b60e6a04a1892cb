"""One node of the lab's Patroni cluster (lab/servers/patroni/cluster.py): its agent under a keeper, its REST API,
its configuration with the cluster's secrets, and the settings that decide when Patroni fails over."""

from __future__ import annotations

import base64
import json
import os
import pwd
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.servers.patroni.runtime import PatroniRuntime
from lab.servers.processes import free_port, spawn, stop
from lab.servers.proxy import BlackholeProxy

READY_WITHIN = 180.0  # bootstrap (initdb) and a replica's base backup, on two cores others load too (90 s was
# once too short here at a load average of 70)
REST_TIMEOUT = 1.0  # a stopped agent never answers: a health check gives up as HAProxy's would
SCOPE = "locklab"
# Small servers: two of them per trial, several trials at once on two cores (as lab/servers/postgres/pair.py).
NODE_CONNECTIONS = 40  # a trial's clients and Patroni's own
NODE_PARAMETERS = {"max_connections": NODE_CONNECTIONS, "shared_buffers": "16MB", "wal_keep_size": "64MB",
                   "max_wal_senders": 5, "max_replication_slots": 5, "scram_iterations": 16,
                   "log_line_prefix": "%m [%p] ", "unix_socket_directories": ""}


@dataclass(frozen=True)
class PatroniSettings:
    """The cluster-wide settings that decide when Patroni fails over, recorded in every trial.

    Patroni's own rule: loop_wait + 2 * retry_timeout <= ttl, ttl >= 20, loop_wait >= 1, retry_timeout >= 3.
    """

    ttl: int = 20  # seconds the leader key lives without the leader renewing it
    loop_wait: int = 1  # seconds between two runs of an agent's HA loop
    retry_timeout: int = 5  # seconds an agent retries the DCS and PostgreSQL before it gives up
    maximum_lag_on_failover: int = 1048576  # bytes a replica may be behind and still be promoted
    primary_start_timeout: int = 300  # seconds to restart a crashed primary in place before failing over
    failsafe_mode: bool = False  # a primary cut from the DCS stays primary if every member answers it
    synchronous_mode: bool = False
    synchronous_mode_strict: bool = False
    watchdog: str = "off"  # no /dev/watchdog on this machine kind: nothing fences a stopped agent's postgres
    max_connections: int = NODE_CONNECTIONS  # more for a fault event shared by many clients

    def __post_init__(self) -> None:
        if self.ttl < 20 or self.loop_wait < 1 or self.retry_timeout < 3:
            raise ValueError(f"Patroni needs ttl >= 20, loop_wait >= 1, retry_timeout >= 3: {self}")
        if self.loop_wait + 2 * self.retry_timeout > self.ttl:
            raise ValueError(f"Patroni needs loop_wait + 2 * retry_timeout <= ttl: {self}")

    def to_json(self) -> dict:
        return asdict(self)

    def dcs(self) -> dict:
        """The bootstrap.dcs section: what every agent reads from the DCS."""
        return {"ttl": self.ttl, "loop_wait": self.loop_wait, "retry_timeout": self.retry_timeout,
                "maximum_lag_on_failover": self.maximum_lag_on_failover,
                "primary_start_timeout": self.primary_start_timeout, "failsafe_mode": self.failsafe_mode,
                "synchronous_mode": self.synchronous_mode, "synchronous_mode_strict": self.synchronous_mode_strict,
                "postgresql": {"use_pg_rewind": True, "use_slots": True,
                               "parameters": {**NODE_PARAMETERS, "max_connections": self.max_connections}}}


@dataclass(frozen=True)
class Secrets:
    superuser: str
    replication: str
    rest: str


class PatroniNode:
    """One Patroni agent, its postgres and its link to the DCS."""

    def __init__(self, root: Path, name: str, runtime: PatroniRuntime):
        self.name = name
        self.root = root / name
        self.data = self.root / "data"
        self.config_path = self.root / "patroni.yml"
        self.log_path = self.root / "patroni.log"
        self.port = free_port()
        self.rest_port = free_port()
        self.runtime = runtime
        self.user = runtime.user
        self.keeper: subprocess.Popen | None = None
        self.dcs_link: BlackholeProxy | None = None

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def config(self, settings: PatroniSettings, secrets: Secrets, bin_dir: Path, etcd_port: int) -> dict:
        """This node's Patroni configuration (written as JSON, which YAML reads)."""
        address = f"127.0.0.1:{self.port}"
        return {
            "scope": SCOPE, "name": self.name,
            "log": {"level": "INFO"},
            "restapi": {"listen": f"127.0.0.1:{self.rest_port}", "connect_address": f"127.0.0.1:{self.rest_port}",
                        "authentication": {"username": "locklab", "password": secrets.rest}},
            "etcd3": {"host": f"127.0.0.1:{etcd_port}", "protocol": "http", "use_proxies": True},
            "bootstrap": {"dcs": settings.dcs(), "initdb": [{"encoding": "UTF8"}, "no-sync"]},
            "postgresql": {
                "listen": address, "connect_address": address, "data_dir": str(self.data), "bin_dir": str(bin_dir),
                "pgpass": str(self.root / "pgpass"), "use_unix_socket": False, "use_unix_socket_repl": False,
                "authentication": {"superuser": {"username": "postgres", "password": secrets.superuser},
                                   "replication": {"username": "replicator", "password": secrets.replication},
                                   "rewind": {"username": "postgres", "password": secrets.superuser}},
                "pg_hba": ["host all all 127.0.0.1/32 scram-sha-256",
                           "host replication replicator 127.0.0.1/32 scram-sha-256"],
                "basebackup": [{"checkpoint": "fast"}],
            },
            "watchdog": {"mode": settings.watchdog},
        }

    def start(self, config: dict) -> None:
        """Write the configuration (the server user's alone) and start the agent under its keeper."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o700)
        self._own(self.root)
        fd = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(config, handle)
        self._own(self.config_path)
        argv = [sys.executable, "-m", "lab.servers.subreaper",
                *(["--user", self.user] if self.user else []), "--", *self.runtime.argv(self.config_path)]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PATRONI", "PG"))}
        env["TMPDIR"] = str(self.root)  # initdb's password file, for the seconds initdb runs
        # SIGTERM, not SIGKILL, when the lab dies: the keeper's cue to end the postgres it adopted.
        self.keeper = spawn(argv, self.log_path, death_signal=signal.SIGTERM, env=env)

    def _own(self, path: Path) -> None:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    @property
    def patroni_pid(self) -> int | None:
        """The agent's pid, as its keeper logged it."""
        try:
            found = re.findall(r"subreaper: started pid (\d+)", self.log_path.read_text(errors="replace"))
        except OSError:
            return None
        return int(found[0]) if found else None

    def agent_running(self) -> bool:
        """Whether the keeper runs and so does its agent (a keeper outlives an agent that died, as its postgres does)."""
        if self.keeper is None or self.keeper.poll() is not None:
            return False
        pid = self.patroni_pid
        if pid is None:
            return True  # the keeper has not logged it yet
        try:
            with open(f"/proc/{pid}/stat") as handle:
                return handle.read().rsplit(")", 1)[-1].split()[0] != "Z"
        except OSError:
            return False

    @property
    def postmaster_pid(self) -> int | None:
        """The running postmaster's pid (postmaster.pid's first line), None when none runs."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return None
        return pid

    @property
    def pids(self) -> list[int]:
        found = [self.keeper.pid] if self.keeper is not None and self.keeper.poll() is None else []
        return found + [p for p in (self.patroni_pid, self.postmaster_pid) if p is not None]

    def rest(self, path: str, *, method: str = "GET", body: dict | None = None, auth: str | None = None,
             timeout: float = REST_TIMEOUT) -> tuple[int, dict]:
        """One REST API request: (HTTP status, the JSON answer or {}); (0, {'error': ...}) when no answer came."""
        request = urllib.request.Request(self.rest_url + path, method=method,
                                         data=None if body is None else json.dumps(body).encode())
        if auth is not None:
            token = base64.b64encode(f"locklab:{auth}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, json_of(answer.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json_of(exc.read())
        except (OSError, TimeoutError) as exc:
            return 0, {"error": f"{type(exc).__name__}: {exc}"}

    def stop(self) -> None:
        """The keeper ends the agent and its postgres (immediate shutdown) and exits."""
        stop(self.keeper, signal.SIGTERM, grace=15.0)
        self.keeper = None
        if self.dcs_link is not None:
            self.dcs_link.stop()
            self.dcs_link = None


def json_of(raw: bytes) -> dict:
    """A REST answer's JSON object (a non-object or non-JSON answer kept under a key of its own)."""
    try:
        found = json.loads(raw or b"{}")
    except ValueError:
        return {"text": raw[:200].decode(errors="replace")}
    return found if isinstance(found, dict) else {"value": found}


def last_line(path: Path) -> str:
    """The agent's last word in its log, with its keeper's line on how it ended: the keeper's own line alone ("pid
    8320 ended (1)") said nothing of why, in a full run's only Patroni error."""
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    if not lines:
        return "(empty log)"
    agent = [ln for ln in lines if not ln.startswith("subreaper:")]
    said = [agent[-1][:300]] if agent else []
    return " / ".join(said + ([lines[-1][:120]] if lines[-1].startswith("subreaper:") else []))
