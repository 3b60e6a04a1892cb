"""ZooKeeper from the operating system's packages, run by the lab on 127.0.0.1 with a config of its own.

Debian's `zookeeper` (3.8) ships the server as jars (libzookeeper-java, /usr/share/java) and pulls in a
Java runtime; the lab runs `java ... ZooKeeperServerMain zoo.cfg` itself, on a free port in its temp
dir, dying with the lab, never the system service (which the package leaves unconfigured). Where java
or the jars are missing, every cell that needs ZooKeeper says *does not run* with the install line.

Four-letter words (`srvr`, `conf`, `mntr`, `cons` and `ruok`, allowed by the lab's config) are how the
lab asks the server what it is: ready, its version, its session bounds, its uptime (a restart's
evidence) and its sessions.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from lab.errors import ServiceError
from lab.servers.embedded import OneProcess
from lab.servers.processes import free_port, spawn, stop, wait_ready, with_environment

MISSING = "zookeeper not installed (apt-get install zookeeper)"
JARS = "/usr/share/java"  # where Debian's libzookeeper-java puts zookeeper.jar (its manifest names the rest)
# Where to look for zookeeper.jar instead (a PATH-style list of folders); set empty, the lab finds no
# ZooKeeper, as on a machine without the package: how a test checks that case where it is installed.
SEARCH_PATH_VARIABLE = "LAB_ZOOKEEPER_SEARCH_PATH"
MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
# A tick of 100 ms: ZooKeeper expires sessions on tick boundaries and allows timeouts from 2 ticks, so
# 1 s sessions (the quick profile's TTL) are granted as asked and expire within a tenth of a second.
TICK_MS = 100
MAX_SESSION_MS = 60_000
FOUR_LETTER_WORDS = "srvr,conf,mntr,cons,ruok"
# A small server: serial GC and the client compiler start the JVM in about a second on a busy core, and
# the heap stays small whatever the machine's memory (the JVM's default is a quarter of it).
JVM_FLAGS = ("-Xms16m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
             "-Djava.net.preferIPv4Stack=true", "-Dzookeeper.admin.enableServer=false",
             f"-Dzookeeper.4lw.commands.whitelist={FOUR_LETTER_WORDS}")
BIND_ATTEMPTS = 3
TIMEOUT = 3.0


def find_zookeeper(path: str | None = None) -> tuple[str, list[str]] | None:
    """(java, the classpath) of an installed ZooKeeper, or None when java or zookeeper.jar is missing.

    By default path is $LAB_ZOOKEEPER_SEARCH_PATH when set (empty: nowhere), else /usr/share/java. The
    classpath adds slf4j-simple (the same package's dependency) when it is there, so the server logs."""
    if path is None:
        path = os.environ.get(SEARCH_PATH_VARIABLE, JARS)
    java = shutil.which("java")
    folders = [Path(p) for p in path.split(os.pathsep) if p]
    jar = next((f / "zookeeper.jar" for f in folders if (f / "zookeeper.jar").is_file()), None)
    if java is None or jar is None:
        return None
    logger = jar.parent / "slf4j-simple.jar"
    return java, [str(jar)] + ([str(logger)] if logger.is_file() else [])


def missing() -> str | None:
    """The one line for a machine without ZooKeeper (MISSING), or None when it is installed."""
    return None if find_zookeeper() is not None else MISSING


def four_letter(host: str, port: int, word: str, timeout: float = TIMEOUT) -> str:
    """A four-letter word's answer (the server closes the connection after it)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def parse_hosts(hosts: str) -> list[tuple[str, int]]:
    """(host, port) of each server in a ZooKeeper connect string ("h1:2181,h2:2181/chroot")."""
    servers = hosts.partition("/")[0]
    out = []
    for entry in (e.strip() for e in servers.split(",") if e.strip()):
        if entry.startswith("["):  # [::1]:2181
            host, _, rest = entry[1:].partition("]")
            port = rest.removeprefix(":")
        else:
            host, _, port = entry.partition(":")
        if port and not port.isdigit():
            raise ServiceError(f"ZooKeeper hosts: {entry!r} is not host:port")
        out.append((host, int(port or 2181)))
    return out


def chroot(hosts: str) -> str:
    """The chroot suffix of a connect string ("/app", or "")."""
    return hosts.partition("/")[1] + hosts.partition("/")[2]


def version(host: str, port: int) -> str:
    """The server's version from `srvr`; ServiceError when it does not serve requests (yet)."""
    answer = four_letter(host, port, "srvr")
    first = answer.splitlines()[0] if answer.strip() else ""
    if first.startswith("Zookeeper version:"):
        return first.removeprefix("Zookeeper version:").split(",")[0].split("-")[0].strip()
    if "not in the whitelist" in answer:
        return "unknown (srvr not allowed)"  # a server that answers, but not that word: reachable all the same
    raise ServiceError(f"ZooKeeper at {host}:{port} is not serving requests: {first or 'no answer'}")


def settings(host: str, port: int) -> dict[str, str]:
    """`conf`: the server's settings (minSessionTimeout, maxSessionTimeout, tickTime ...); {} if not allowed."""
    try:
        answer = four_letter(host, port, "conf")
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in answer.splitlines() if "=" in line)


def uptime_ms(host: str, port: int) -> int | None:
    """`mntr`'s zk_uptime: how long this server process has served, in ms (None if `mntr` is not allowed)."""
    for line in four_letter(host, port, "mntr").splitlines():
        name, _, value = line.partition("\t")
        if name == "zk_uptime" and value.strip().isdigit():
            return int(value)
    return None


class EmbeddedZooKeeper(OneProcess):
    """One standalone ZooKeeper (ZooKeeperServerMain) on 127.0.0.1, its data and log under root/name.

    It keeps its data across restart(): ZooKeeper persists sessions and their ephemeral nodes, so a
    session whose client reconnects within its timeout keeps its locks through a restart."""

    name = "zookeeper"

    def __init__(self, root: Path, name: str = "zookeeper", *, install: tuple[str, list[str]] | None = None,
                 netns: int | None = None, environment: dict[str, str] | None = None):
        """netns: a network namespace to run in (lab/servers/netns.py); start() and clients must be inside it.
        environment: variables for the server's JVM alone (a fake clock's preload, lab/servers/fake_clock.py)."""
        self.netns = netns
        self.environment = dict(environment or {})
        found = install or find_zookeeper()
        if found is None:
            raise ServiceError(MISSING)
        self.java, self.classpath = found
        self.root = root / name
        self.data = self.root / "data"
        self.log_path = self.root / "server.log"
        self.config = self.root / "zoo.cfg"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def hosts(self) -> str:
        """The connect string a client is given."""
        return f"127.0.0.1:{self.port}"

    def config_lines(self) -> list[str]:
        return [f"tickTime={TICK_MS}", f"dataDir={self.data}", f"clientPort={self.port}",
                "clientPortAddress=127.0.0.1", "maxClientCnxns=0",  # the timing runs open hundreds from one address
                f"minSessionTimeout={2 * TICK_MS}", f"maxSessionTimeout={MAX_SESSION_MS}"]

    def argv(self) -> list[str]:
        return [self.java, *JVM_FLAGS, "-cp", os.pathsep.join(self.classpath), MAIN, str(self.config)]

    def start(self) -> None:
        """Write the config and start the server; a port another process took meanwhile gets a new one."""
        self.root.mkdir(parents=True, exist_ok=True)
        for attempt in range(BIND_ATTEMPTS):
            self.config.write_text("\n".join(self.config_lines()) + "\n")
            logged = self.log_path.stat().st_size if self.log_path.exists() else 0
            self.proc = spawn(self.argv(), self.log_path, cwd=self.root, netns=self.netns,
                              env=with_environment(self.environment))
            try:
                wait_ready(self._ping, self.proc, "embedded ZooKeeper", self.log_path)
                return
            except ServiceError:
                stop(self.proc, signal.SIGKILL)
                self.proc = None
                said = self.log_path.read_bytes()[logged:].decode(errors="replace")
                if "Address already in use" not in said or attempt == BIND_ATTEMPTS - 1:
                    raise
                self.port = free_port()

    def _ping(self) -> str:
        return version("127.0.0.1", self.port)
