"""The partition levers of a cluster whose members reach one another only through the lab's peer proxies.

etcd's members and ZooKeeper's servers dial their peers through a PeerProxy each (lab/servers/peer_proxy.py);
a partition is the set of isolated members, and a proxy refuses to relay between a member inside it and one
outside, whichever of the two dialed. One class for both clusters: which member dialed a connection, whether the
partition separates it from the member it reaches, and isolating one member or healing, both ways.
"""

from __future__ import annotations

import subprocess
import time
from typing import Generic, Iterator, Protocol, Sequence, TypeVar

from lab.errors import ServiceError
from lab.servers.proxy import gates_held


class _Proxy(Protocol):
    """What the levers use of a peer proxy: its gate, held while the partition changes, and its connections."""

    _gate: object  # a threading.Lock: no pump is between its check and its send while it is held

    def open_connections(self) -> list: ...


class _Member(Protocol):
    name: str
    proc: subprocess.Popen | None

    @property
    def peer_proxies(self) -> list: ...


M = TypeVar("M", bound=_Member)


class PeerPartition(Generic[M]):
    """A cluster's partition: `members` (each with a name, a process and its peer proxies) and `isolated`."""

    members: Sequence[M]
    isolated: frozenset[str]
    label: str  # the service's name in a sentence: "etcd", "ZooKeeper"
    leader_within: float  # how long the members may take to agree on a leader
    unanswered: tuple[type[Exception], ...] = ()  # what leader() may raise while a member is between elections

    def leader(self) -> M | None:
        """The leader every live, connected member agrees on, or None."""
        raise NotImplementedError

    def wait_leader(self, within: float | None = None) -> M:
        """Until the members agree on a leader. No event says an election ended: ask again every 50 ms."""
        within = self.leader_within if within is None else within
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                found = self.leader()
            except self.unanswered:
                found = None
            if found is not None:
                return found
            time.sleep(0.05)
        raise ServiceError(f"the {self.label} members agreed on no leader within {within:.0f} s")

    def followers(self) -> list[M]:
        leader = self.wait_leader()
        return [m for m in self.members if m is not leader]

    def member_connections(self) -> Iterator[tuple[M, list]]:
        """Each live member with its process's TCP connections (psutil's), as the kernel lists them now."""
        import psutil

        for member in self.members:
            if member.proc is None:
                continue
            try:
                yield member, psutil.Process(member.proc.pid).net_connections(kind="tcp4")
            except psutil.Error:
                continue

    def _dialer(self, client_port: int, proxy_port: int) -> str | None:
        """The member whose process owns the other end of a connection to proxy_port from client_port."""
        for member, conns in self.member_connections():
            if any(c.laddr and c.raddr and c.laddr.port == client_port and c.raddr.port == proxy_port
                   for c in conns):
                return member.name
        return None

    def _separated(self, dialer: str | None, member: str) -> bool:
        return dialer is not None and (dialer in self.isolated) != (member in self.isolated)

    def _set_isolated(self, names: frozenset[str]) -> None:
        with gates_held([p for m in self.members for p in m.peer_proxies]):
            self.isolated = names

    def isolate(self, member: M) -> None:
        """Cut every peer link between member and the others, both ways; its clients still reach it."""
        self._set_isolated(frozenset({member.name}))

    def heal(self) -> None:
        """Every peer link flows again; idempotent."""
        self._set_isolated(frozenset())

    def peer_links(self) -> list:
        """The peer connections still open (a closed one carries nothing, whoever dialed it)."""
        return [c for m in self.members for p in m.peer_proxies for c in p.open_connections() if not c.closed]
