"""The proxy in front of one cluster member's peer port: it relays a connection unless the partition cuts its dialer off.

etcd's members, ZooKeeper's servers and Redis's Sentinels dial one another through one of these each, so a partition
(lab/servers/peer_partition.py) cuts a link whoever dialed it. Cut links behave like BlackholeProxy's: no RST, the
bytes stop; healed, they flow again.
"""

from __future__ import annotations

import select
import socket
import time
from dataclasses import dataclass
from typing import Callable, cast

from lab.servers.proxy import _TICK, BlackholeProxy, Relayed


@dataclass
class PeerConnection(Relayed):
    """One relayed peer connection and the member that dialed it (None: not a member of this cluster)."""

    dialer: str | None = None
    closed: bool = False  # its pumps ended: nothing can leak through it any more


class PeerProxy(BlackholeProxy):
    """The only way into one member's peer port; relays a connection unless its dialer is cut off from it."""

    def __init__(self, member: str, target_port: int, identify: Callable[[int, int], str | None],
                 cut: Callable[[str | None, str], bool]):
        super().__init__("127.0.0.1", target_port)
        self.member = member
        self._identify = identify  # (dialer's port, our port) -> the member that dialed
        self._cut = cut  # (dialer, member) -> whether the partition separates them

    def _record(self, client_port: int, upstream_port: int) -> PeerConnection:
        return PeerConnection(client_port, upstream_port, dialer=self._who(client_port))

    def _who(self, client_port: int, tries: int = 10) -> str | None:
        """The dialing member; a socket table read in the instant a connection is made can miss it, so ask
        again a few times before leaving it unknown (and the partition unconfirmed)."""
        for _ in range(tries):
            dialer = self._identify(client_port, self.port)
            if dialer is not None:
                return dialer
            time.sleep(0.02)
        return None

    def open_connections(self) -> list[PeerConnection]:
        return cast(list[PeerConnection], super().open_connections())  # _record makes each one

    def _pump(self, src, dst, relayed: Relayed, way: str) -> None:
        record = cast(PeerConnection, relayed)  # _record makes each one
        try:
            readable = select.poll()
            readable.register(src, select.POLLIN)  # ValueError: stop() closed the socket before we got here
            while not self._closed.is_set():
                if self._cut(record.dialer, self.member):
                    self._closed.wait(_TICK)  # cut: leave the bytes where they are, as a dropped link does
                    continue
                if not readable.poll(_TICK * 1000):
                    continue
                data = src.recv(65536)
                if not data:
                    break
                while True:
                    with self._gate:  # EtcdCluster.isolate() holds every proxy's gate while it changes sides
                        if not self._cut(record.dialer, self.member):
                            dst.sendall(data)
                            with self._lock:
                                setattr(record, way, getattr(record, way) + len(data))
                            break
                    if self._closed.is_set():
                        return
                    self._closed.wait(_TICK)  # the cut came while we read: hold these bytes until it heals
        except (OSError, ValueError):
            pass
        finally:
            record.closed = True
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
