"""The proxy in front of one cluster member's peer port: it relays a connection unless the partition cuts its dialer off.

etcd's members, ZooKeeper's servers and Redis's Sentinels dial one another through one of these each, so a partition
(lab/servers/peer_partition.py) cuts a link whoever dialed it. Cut links behave like BlackholeProxy's: no RST, the
bytes stop; healed, they flow again.
"""

from __future__ import annotations

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

    def _passes(self, record: Relayed) -> bool:
        return not self._cut(cast(PeerConnection, record).dialer, self.member)  # _record makes each one

    def _wait_to_pass(self, record: Relayed) -> bool:
        if self._passes(record):
            return True
        self._closed.wait(_TICK)
        return False

    def _pump_ended(self, record: Relayed) -> None:
        cast(PeerConnection, record).closed = True
