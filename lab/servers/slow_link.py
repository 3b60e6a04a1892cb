"""Ports in a private network namespace whose packets the lab can slow down or lose, and count: iptables there.

A lock's connection on loopback never loses a packet and answers in microseconds. To make it slow or
lossy for one client only, that client is given another port (via()), which iptables' nat table turns
into the server's real one (DNAT); every packet of a connection first addressed to that port, both
ways, is then found by conntrack's original destination port, while everyone else's connections to
the same server go untouched. On such packets, in the input hook, the link can park each one in a
queue that a program releases later (NFQUEUE, held by lab/servers/nfqueue.py) or drop a random share
(the statistic match). A drop on the input hook looks to the sender like a lost packet on the wire; one
on the output hook would hand the sender an EPERM instead.

The rules live in the namespace (lab/servers/netns.py) and vanish with it; nothing outside it is
touched. It needs root and iptables (Debian's default is the nf_tables one; the legacy one works too).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from lab.servers.netns import NetNamespace
from lab.servers.netns import unavailable_reason as namespace_unavailable
from lab.servers.processes import free_port

MISSING = "iptables not installed (apt-get install iptables)"
TOOLS = ("iptables", "iptables-restore", "iptables-save")  # the fault's rules: flushed, added, counted
SEARCH_AFTER_PATH = "/usr/sbin"  # Debian's iptables is there, outside an unprivileged user's PATH

SEEN, FAULT = "LOCKLAB-SEEN", "LOCKLAB-FAULT"  # every packet of a slowed port counted; the fault's own rules
_PACKETS = re.compile(r"^\[(\d+):\d+\] -A ")
_NAMED = re.compile(r'--comment "?([^" ]+)"?')


class LinkUnavailable(Exception):
    """The kernel refused the link's rules (a netfilter piece missing from it); said as 'does not run'."""


def _find(tool: str) -> str | None:
    search = os.pathsep.join(p for p in (os.environ.get("PATH", ""), SEARCH_AFTER_PATH) if p)
    return shutil.which(tool, path=search)


def unavailable_reason() -> str | None:
    """Why a slowed link cannot be made here (no namespace, no root, no iptables), or None: one line each."""
    reason = namespace_unavailable()
    if reason is not None:
        return reason
    if any(_find(tool) is None for tool in TOOLS):
        return MISSING
    return None


@dataclass(frozen=True)
class Direction:
    """Which packets of a slowed connection a fault takes: toward the server only, or both ways."""

    both_ways: bool

    def match(self) -> str:
        return "" if self.both_ways else " --ctdir ORIGINAL"


TO_SERVER, BOTH_WAYS = Direction(False), Direction(True)


class SlowLink:
    """The rules of one namespace: ports routed through it, their counters, and the fault's rules on them."""

    def __init__(self, namespace: NetNamespace):
        self.namespace = namespace
        self.ports: list[int] = []  # every slowed port: those via() made and those watch()ed
        self._restore("*filter\n"
                      f":{SEEN} - [0:0]\n:{FAULT} - [0:0]\n"
                      f"-A INPUT -j {SEEN}\n-A INPUT -j {FAULT}\n"
                      "COMMIT\n")

    def _run(self, argv: list[str], stdin: str | None = None) -> str:
        binary = _find(argv[0])
        if binary is None:
            raise LinkUnavailable(MISSING)
        with self.namespace.entered():
            result = subprocess.run([binary, *argv[1:]], input=stdin, capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            said = (result.stderr or result.stdout).strip().splitlines()
            why = said[-1] if said else f"exit code {result.returncode}"
            raise LinkUnavailable(f"{argv[0]} refused the slowed link's rules: {why}")
        return result.stdout

    def _restore(self, rules: str) -> None:
        self._run(["iptables-restore", "--noflush", "--wait"], rules)

    def via(self, port: int) -> int:
        """A new port that reaches 127.0.0.1:port inside the namespace, its connections slowed by the fault."""
        with self.namespace.entered():
            slowed = free_port()
        self._restore("*nat\n"
                      f"-A OUTPUT -p tcp -d 127.0.0.1 --dport {slowed} -j DNAT --to-destination 127.0.0.1:{port}\n"
                      "COMMIT\n")
        self.watch(slowed)
        return slowed

    def watch(self, port: int) -> None:
        """Count every packet of connections first addressed to this port, and let the fault take them."""
        self._restore(f"*filter\n-A {SEEN} -m conntrack --ctorigdstport {port} -m comment --comment seen:{port}\n"
                      "COMMIT\n")
        self.ports.append(port)

    def delay(self, queues: dict[int, int], direction: Direction) -> None:
        """Park the packets of each port (going the given way) in its queue number, for a DelayQueue to hold."""
        self._restore("*filter\n" + "".join(
            f"-A {FAULT} -m conntrack --ctorigdstport {port}{direction.match()} -m comment --comment held:{port} "
            f"-j NFQUEUE --queue-num {queue}\n" for port, queue in queues.items()) + "COMMIT\n")

    def lose(self, ports: list[int], share: float, direction: Direction) -> None:
        """Drop each packet of these ports (going the given way) with probability share, counting what the rule
        saw and what it dropped."""
        self._restore("*filter\n" + "".join(
            f"-A {FAULT} -m conntrack --ctorigdstport {port}{direction.match()} -m comment --comment during:{port}\n"
            f"-A {FAULT} -m conntrack --ctorigdstport {port}{direction.match()} -m comment --comment lost:{port} "
            f"-m statistic --mode random --probability {share:.4f} -j DROP\n" for port in ports) + "COMMIT\n")

    def counts(self) -> dict[str, int]:
        """Packets each rule has matched, by its name (seen:PORT, held:PORT, during:PORT, lost:PORT)."""
        shown = self._run(["iptables-save", "-c", "-t", "filter"])
        found = {}
        for line in shown.splitlines():
            packets, name = _PACKETS.match(line), _NAMED.search(line)
            if packets and name:
                found[name.group(1)] = int(packets.group(1))
        return found

    def clear(self) -> None:
        """Remove the fault's rules (idempotent): the ports are fast and whole again, their counters kept."""
        if self.namespace.fd is not None:
            self._run(["iptables", "--wait", "-F", FAULT])

    def connections(self, ports: list[int]) -> dict[int, int]:
        """Established TCP connections to these ports, by the pid of the process that holds each (ss -p)."""
        if not ports:
            return {}
        shown = self.namespace.command(["ss", "-tnpH", "state", "established", "(",
                                        *" or ".join(f"dport = :{p}" for p in ports).split(), ")"])
        owners: dict[int, int] = {}
        for pid in re.findall(r"pid=(\d+)", shown):
            owners[int(pid)] = owners.get(int(pid), 0) + 1
        return owners
