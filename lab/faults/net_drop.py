"""The holder's lock connection dropped on the network: no FIN, no RST, no answer to anything.

Unlike the cut (a proxy that stops relaying, whose kernel still answers the server's keepalive
probes), this drop takes the connection's packets off the wire inside a private network namespace
(lab/servers/netns.py), so the server's keepalives go unanswered as they would when the holder's
host falls off the network. Only the lock's connection is dropped: the run's other sessions, its
writes included, go on.

confirm() proves the drop holds the lock's own session: its client port is the one dropped and the
server's side of it was quiet (nothing unacknowledged in flight: a keepalive, not a retransmission,
is what must end it). struck() proves it reached the server: packets were taken and the server ended
that session with a timeout, in its own log.
"""

from __future__ import annotations

import re
import time

from sqlalchemy import text

from lab.declarations.capabilities import Capability
from lab.faults.base import Fault, FaultNotConfirmed, Target
from lab.servers.netns import NetNamespace

QUIET_WITHIN_S = 5.0  # how long the lock's connection may take to have nothing in flight before the drop
TIMED_OUT = "could not receive data from client: Connection timed out"


def _send_queue(namespace: NetNamespace, server_port: int, client_port: int) -> int | None:
    """Bytes the server has sent on this connection and not had acknowledged (ss's Send-Q), or None."""
    shown = namespace.command(["ss", "-tn", "state", "established", "(", "sport", "=", f":{server_port}", "and",
                               "dport", "=", f":{client_port}", ")"])
    for line in shown.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 2 and fields[1].isdigit():
            return int(fields[1])
    return None


class NetDrop(Fault):
    name = "net_drop"
    label = "lock connection dropped on the network"

    def __init__(self, namespace: NetNamespace | None = None, server_port: int | None = None):
        """namespace: where the server and the holder run; server_port: the server's port there."""
        self.namespace, self.server_port = namespace, server_port
        self.client_port: int | None = None
        self.dropped_at: float | None = None

    def applies_to(self, backend_cls) -> str | None:
        if backend_cls.lock_service != "postgres" or Capability.SESSION_LOCK not in backend_cls.capabilities:
            return ("holds no PostgreSQL session lock: a dropped connection ends only its own transaction "
                    "(a lease's lapse is the cut's column)")
        return None

    def inject(self, target: Target) -> None:
        if self.namespace is None or self.server_port is None or target.lock_pid is None:
            raise FaultNotConfirmed("the drop has no namespace, no server port or no lock session to drop")
        with target.monitor.connect() as conn:
            self.client_port = conn.execute(text("select client_port from pg_stat_activity where pid = :p"),
                                            {"p": target.lock_pid}).scalar()
        if self.client_port is None or self.client_port < 0:
            raise FaultNotConfirmed(f"the lock's session (pid {target.lock_pid}) has no TCP client port")
        deadline = time.monotonic() + QUIET_WITHIN_S
        while (queued := _send_queue(self.namespace, self.server_port, self.client_port)) != 0:
            if time.monotonic() > deadline:
                raise FaultNotConfirmed(
                    f"the server has no established connection to port {self.client_port}" if queued is None else
                    f"the lock's connection never went quiet: the server kept {queued} bytes unacknowledged")
            time.sleep(0.02)  # polling the kernel's socket table, not standing in for the server
        self.namespace.drop_port(self.client_port)
        self.dropped_at = time.monotonic()

    def confirm(self, target: Target) -> dict:
        with target.monitor.connect() as conn:
            port = conn.execute(text("select client_port from pg_stat_activity where pid = :p"),
                                {"p": target.lock_pid}).scalar()
        if port != self.client_port:
            raise FaultNotConfirmed(f"the lock's session (pid {target.lock_pid}) is not on the dropped port")
        return {"fault": self.name, "pid": target.lock_pid, "client_port": self.client_port,
                "send_queue_at_drop": 0}

    def struck(self, target: Target, log_text: str) -> dict:
        """Evidence the drop reached the server: packets taken, and the session ended by a timeout."""
        if self.namespace is None:
            raise FaultNotConfirmed("the drop has no namespace")
        taken = self.namespace.dropped_packets()
        lines = [ln for ln in log_text.splitlines() if f"[{target.lock_pid}]" in ln and TIMED_OUT in ln]
        if taken == 0:
            raise FaultNotConfirmed("the drop took no packet of the lock's connection")
        return {"packets_dropped": taken, "server_log": re.sub(r"^\S+ \S+ \S+ ", "", lines[0]) if lines else None}

    def heal(self, target: Target) -> dict:
        if self.namespace is not None:
            self.namespace.allow_all()
        return {}
