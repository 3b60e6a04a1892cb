"""The Sentinel service's partition: the first primary cut from the Sentinels and the replica, never from a lock
client. The proxy in front of the first learns who dialed each connection from the kernel's socket table, for the
service's own few processes only."""

from __future__ import annotations

import os

from lab.errors import ServiceError
from lab.servers.peer_proxy import PeerProxy
from lab.servers.proxy import gates_held
from lab.servers.redis.server import EmbeddedRedis
from lab.servers.sentinel.parts import SentinelParts

CLIENT = "a client"  # a dialer that is no part of the service: a lock client, the lab's probe; never cut


class SentinelPartition(SentinelParts):
    """The faults' levers on the links between the service's parts."""

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
        with gates_held(list(self.fronts.values())):
            self.isolated = name

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
