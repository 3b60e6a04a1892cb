"""A private network namespace with its own loopback, where the lab may drop a connection's packets.

A real network drop sends no FIN and no RST: the peer's kernel stops answering, keepalive probes
included. A loopback proxy cannot do that (its kernel still acknowledges every probe), so the lab
drops packets with the kernel's traffic control (tc) instead, and does it inside a namespace of
its own, where no other program's traffic can be touched and everything vanishes with it.

The namespace is per thread in Linux: a thread that enters it opens its sockets there, and the
threads and processes it starts are born there. The lab's children are forked by one launcher
thread (lab/servers/processes.py), so they are sent in with setns() before they exec.
It needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2's `ip`, `tc` and `ss`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import socket
import subprocess
import threading
from contextlib import contextmanager

from lab.servers.proxy import BlackholeProxy

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)

_SINK = "lkdrop0"  # a veth left down: what is redirected to it is discarded
_TAKEN = re.compile(r"Sent \d+ bytes (\d+) pkt")


class NamespaceUnavailable(Exception):
    """This machine or user cannot make a private network namespace with tc (said as 'does not run')."""


def _setns(fd: int | None) -> None:
    if fd is None:  # a closed namespace (NetNamespace.fd); setns would refuse the NULL it became
        raise OSError(errno.EBADF, "setns: the network namespace is closed")
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


MISSING = "iproute2 not installed (apt-get install iproute2)"
TOOLS = ("ip", "tc", "ss")  # the namespace's loopback, the drop, and the lock connection it names


def unavailable_reason() -> str | None:
    """Why a network namespace with tc cannot be made here, or None.

    One line naming what to install or why not, the way every optional package of the lab says it."""
    if any(shutil.which(tool) is None for tool in TOOLS):
        return MISSING
    if os.geteuid() != 0:
        return "dropping packets needs root: a private network namespace (CAP_SYS_ADMIN) and tc (CAP_NET_ADMIN)"
    return None


class NetNamespace:
    """A network namespace kept alive by an open descriptor; close() lets it go."""

    def __init__(self):
        reason = unavailable_reason()
        if reason is not None:
            raise NamespaceUnavailable(reason)
        made: dict = {}

        def make() -> None:  # a throwaway thread unshares, so no thread of the lab stays inside
            try:
                if _libc.unshare(CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"unshare(CLONE_NEWNET): {os.strerror(err)}")
                made["fd"] = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
            except OSError as exc:
                made["error"] = exc

        thread = threading.Thread(target=make, name="locklab-netns")
        thread.start()
        thread.join()
        if "error" in made:
            raise NamespaceUnavailable(str(made["error"]))
        self.fd: int | None = made["fd"]
        self.command(["ip", "link", "set", "lo", "up"])

    @contextmanager
    def entered(self):
        """The calling thread inside the namespace for the block (its new sockets and children too)."""
        home = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
        try:
            _setns(self.fd)
            yield self
        finally:
            _setns(home)
            os.close(home)

    def run(self, fn, *args, **kwargs):
        """fn(*args, **kwargs) on a thread of its own inside the namespace; its result or its exception."""
        box: dict = {}

        def body() -> None:
            try:
                _setns(self.fd)
                box["value"] = fn(*args, **kwargs)
            except BaseException as exc:  # handed back to the caller's thread
                box["error"] = exc

        thread = threading.Thread(target=body, name="locklab-in-netns")
        thread.start()
        thread.join()
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def command(self, argv: list[str]) -> str:
        """Run a short command (ip, tc) inside the namespace; its stdout, or CalledProcessError."""
        with self.entered():
            result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            raise subprocess.CalledProcessError(result.returncode, argv, result.stdout, result.stderr)
        return result.stdout

    def drop_port(self, port: int) -> None:
        """From now on every packet to or from this TCP port on loopback vanishes, silently.

        Packets are taken on the way *in* (lo's ingress) and sent to a device that is down, where they
        are discarded. A drop on the way out would tell the sender's kernel: it then retries a keepalive
        probe every half second without counting it, and the connection never dies as it would on a
        real network.
        """
        self.allow_all()
        self.command(["ip", "link", "add", _SINK, "type", "veth", "peer", "name", f"{_SINK}p"])  # left down
        self.command(["tc", "qdisc", "add", "dev", "lo", "ingress"])
        for direction in ("sport", "dport"):
            self.command(["tc", "filter", "add", "dev", "lo", "parent", "ffff:", "protocol", "ip", "prio", "1",
                          "u32", "match", "ip", direction, str(port), "0xffff",
                          "action", "mirred", "egress", "redirect", "dev", _SINK])

    def dropped_packets(self) -> int:
        """Packets the drop has taken so far (0 when there is no drop)."""
        shown = self.command(["tc", "-s", "filter", "show", "dev", "lo", "parent", "ffff:"])
        return sum(int(n) for n in _TAKEN.findall(shown))

    def allow_all(self) -> None:
        """Remove any drop (idempotent)."""
        if self.fd is None:
            return
        with self.entered():
            subprocess.run(["tc", "qdisc", "del", "dev", "lo", "ingress"], capture_output=True, timeout=30)
            subprocess.run(["ip", "link", "del", _SINK], capture_output=True, timeout=30)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Bridge(BlackholeProxy):
    """A port on the lab's own loopback that reaches a port on a namespace's loopback.

    The lab's own clients (a contender, the monitor) talk to servers inside a namespace through it while
    every thread of the lab stays outside: gRPC, for one, opens its connections from threads of its own,
    which do not follow a thread into a namespace. Only the bridge's connection to the server is made inside.
    """

    def __init__(self, namespace: NetNamespace, port: int):
        super().__init__("127.0.0.1", port)
        self.namespace = namespace

    def _connect_upstream(self, target: tuple[str | None, int]) -> socket.socket:
        with self.namespace.entered():
            return socket.create_connection(target, timeout=5)
