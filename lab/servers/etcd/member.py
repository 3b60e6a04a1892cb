"""One etcd member of the lab's three-member cluster: its process, its real ports, and the two proxies the cluster
reaches it through (lab/servers/etcd/cluster.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TypeVar

from lab.errors import ServiceError
from lab.servers.embedded import OneProcess
from lab.servers.peer_proxy import PeerProxy
from lab.servers.processes import free_port
from lab.servers.proxy import BlackholeProxy

_T = TypeVar("_T")


def started(part: _T | None, what: str) -> _T:
    """A member's process or proxy, which exists between start() (or restart()) and stop() or kill()."""
    if part is None:
        raise ServiceError(f"etcd member {what} is not running")
    return part


class EtcdMember(OneProcess):
    """One member: its process, its real ports, and the two proxies the cluster reaches it through."""

    def __init__(self, root: Path, name: str):
        self.name = name
        self.root = root / name
        self.log_path = self.root / "server.log"
        self.client_port, self.peer_port = free_port(), free_port()
        self.client_proxy: BlackholeProxy | None = None
        self.peer_proxy: PeerProxy | None = None
        self.proc: subprocess.Popen | None = None
        self.id: int | None = None  # etcd's member id, known once the cluster has started

    @property
    def endpoint(self) -> str:
        """Where a client reaches this member: through its client proxy."""
        return f"127.0.0.1:{started(self.client_proxy, self.name).port}"

    @property
    def direct(self) -> str:
        """The member's own client port, for the lab's view of it."""
        return f"127.0.0.1:{self.client_port}"

    @property
    def peer_proxies(self) -> list[PeerProxy]:
        return [self.peer_proxy] if self.peer_proxy is not None else []

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{started(self.peer_proxy, self.name).port}"
