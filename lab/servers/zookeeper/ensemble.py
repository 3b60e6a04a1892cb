"""Three ZooKeeper servers on loopback (QuorumPeerMain, Debian's jars), which the lab can partition.

How a partition is made. ZooKeeper's servers talk over two kinds of connection: a follower dials the
leader's quorum port (replication, and the pings that keep its clients' sessions alive on the
leader), and every server dials every other's election port (votes). Each member's own config lists
itself at its real ports and the others at proxies in front of theirs (a PeerProxy, as for etcd:
lab/servers/etcd/cluster.py), so every connection one member dials to another goes through the
dialed member's proxy, which learns the dialer from the kernel's socket table and relays it unless
the two are on different sides of the partition. isolate(m) cuts every link between m and the other
two, both ways; heal() lets them flow again.

One detail makes the election port's proxy more than a relay. When a server with a lower id dials one
with a higher id, the higher one hangs up and dials back, at the address the lower one advertised in
its first message: its own real election port, which no proxy would carry. So that proxy rewrites
the address in that first message (protocol version, server id, address) to the dialer's own proxy,
and ZooKeeper's dial-back goes through it too. confirm() checks the members' socket tables for any
connection between two members that no proxy carries.

Clients reach each member through a BlackholeProxy on its client port, which a partition never cuts
(a client stays on its member's side); the lab's own view of a member (`srvr`) uses the real port.
Ticks are 100 ms, as for the embedded server: a follower that hears nothing from its leader for
syncLimit (1 s) gives it up and stops serving its clients, and the leader drops it as long.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
from functools import partial
from pathlib import Path
from typing import Callable

from lab.errors import ServiceError
from lab.servers.embedded import OneProcess
from lab.servers.peer_partition import PeerPartition
from lab.servers.peer_proxy import PeerProxy
from lab.servers.processes import free_port, spawn, stop, wait_ready
from lab.servers.proxy import BlackholeProxy
from lab.servers.zookeeper import server as zookeeper

SIZE = 3
INIT_LIMIT, SYNC_LIMIT = 50, 10  # ticks: 5 s for a follower to join and sync, 1 s of silence before a link is given up
QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
READY_WITHIN = 60.0


def _started(part, what: str):
    if part is None:
        raise ServiceError(f"ZooKeeper member {what} is not running")
    return part


def _exactly(sock, size: int) -> bytes:
    """size bytes from sock, or fewer when it closes first."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


class _FirstMessageRewritten:
    """A dialer's socket whose first recv() returns its election handshake with the address rewritten."""

    def __init__(self, sock: socket.socket, rewrite: Callable[[socket.socket], bytes]):
        self._sock, self._rewrite, self._first = sock, rewrite, True

    def fileno(self) -> int:
        return self._sock.fileno()

    def recv(self, size: int) -> bytes:
        if self._first:
            self._first = False
            return self._rewrite(self._sock)
        return self._sock.recv(size)

    def shutdown(self, how: int) -> None:
        self._sock.shutdown(how)


class ElectionProxy(PeerProxy):
    """The proxy in front of a member's election port: a PeerProxy whose dialer's handshake is made to
    advertise the dialer's own proxy (advertised(server id) -> its election proxy's port)."""

    def __init__(self, member: str, target_port: int, identify, cut, advertised: Callable[[int], int | None]):
        super().__init__(member, target_port, identify, cut)
        self._advertised = advertised
        self.rewritten = 0  # handshakes whose address was rewritten

    def _handshake(self, sock: socket.socket) -> bytes:
        """Protocol version (a negative long), server id (long), address length (int), address ("host:port",
        several joined by '|'): the address becomes 127.0.0.1 and the dialer's proxy port."""
        head = _exactly(sock, 8)
        if len(head) < 8 or struct.unpack(">q", head)[0] >= 0:  # the old protocol sends only the server id
            return head
        sid_bytes, size_bytes = _exactly(sock, 8), _exactly(sock, 4)
        if len(size_bytes) < 4:
            return head + sid_bytes + size_bytes
        address = _exactly(sock, struct.unpack(">i", size_bytes)[0])
        port = self._advertised(struct.unpack(">q", sid_bytes)[0])
        if port is None:
            return head + sid_bytes + size_bytes + address
        replaced = f"127.0.0.1:{port}".encode()
        self.rewritten += 1
        return head + sid_bytes + struct.pack(">i", len(replaced)) + replaced

    def _pump(self, src, dst, relayed, way: str) -> None:
        if way == "to_server":
            src = _FirstMessageRewritten(src, self._handshake)
        super()._pump(src, dst, relayed, way)


class ZooKeeperMember(OneProcess):
    """One server: its id, process, real ports, and the proxies the others and its clients reach it through."""

    def __init__(self, root: Path, sid: int):
        self.sid = sid
        self.name = f"zk{sid}"
        self.root = root / self.name
        self.data = self.root / "data"
        self.log_path = self.root / "server.log"
        self.config = self.root / "zoo.cfg"
        self.client_port, self.quorum_port, self.election_port = free_port(), free_port(), free_port()
        self.client_proxy: BlackholeProxy | None = None
        self.quorum_proxy: PeerProxy | None = None
        self.election_proxy: ElectionProxy | None = None
        self.proc: subprocess.Popen | None = None

    @property
    def hosts(self) -> str:
        """Where a client reaches this member: through its client proxy."""
        return f"127.0.0.1:{_started(self.client_proxy, self.name).port}"

    @property
    def peer_proxies(self) -> list[PeerProxy]:
        return [p for p in (self.quorum_proxy, self.election_proxy) if p is not None]

    def server_line(self, myself: bool) -> str:
        """This member's line in a config: its real ports in its own, its proxies' in the others'."""
        if myself:
            return f"server.{self.sid}=127.0.0.1:{self.quorum_port}:{self.election_port}"
        quorum, election = _started(self.quorum_proxy, self.name), _started(self.election_proxy, self.name)
        return f"server.{self.sid}=127.0.0.1:{quorum.port}:{election.port}"


def _said(member: ZooKeeperMember, field: str) -> str | None:
    """One field of what the member says of itself (`srvr`), None when it does not say it."""
    answer = zookeeper.four_letter("127.0.0.1", member.client_port, "srvr", timeout=1.0)
    return next((line.split(":", 1)[1].strip() for line in answer.splitlines() if line.startswith(f"{field}:")), None)


class ZooKeeperEnsemble(PeerPartition[ZooKeeperMember]):
    """Three members; isolate() and heal() are the partition's levers, mode() a member's own view."""

    name, label = "zookeeper", "ZooKeeper"
    leader_within = 20.0

    def __init__(self, root: Path, size: int = SIZE, *, install: tuple[str, list[str]] | None = None):
        found = install or zookeeper.find_zookeeper()
        if found is None:
            raise ServiceError(zookeeper.MISSING)
        self.java, self.classpath = found
        self.root = root
        self.members = [ZooKeeperMember(root, sid) for sid in range(1, size + 1)]
        self.isolated: frozenset[str] = frozenset()

    # --- lifecycle ---------------------------------------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        return [pid for m in self.members for pid in m.pids]

    def start(self) -> None:
        """Proxies first (their ports go into the configs), then every member at once; ready when one leads
        and the others follow it."""
        try:
            for member in self.members:
                member.client_proxy = BlackholeProxy("127.0.0.1", member.client_port).start()
                member.quorum_proxy = PeerProxy(member.name, member.quorum_port, self._dialer, self._separated).start()
                member.election_proxy = ElectionProxy(member.name, member.election_port, self._dialer,
                                                      self._separated, self._election_proxy_port).start()
            for member in self.members:
                self._spawn(member)
            for member in self.members:
                wait_ready(partial(self._serving, member), _started(member.proc, member.name),
                           f"ZooKeeper member {member.name}", member.log_path, READY_WITHIN)
            self.wait_leader()
        except BaseException:
            self.stop()
            raise

    def _config(self, member: ZooKeeperMember) -> list[str]:
        return [f"tickTime={zookeeper.TICK_MS}", f"initLimit={INIT_LIMIT}", f"syncLimit={SYNC_LIMIT}",
                f"dataDir={member.data}", f"clientPort={member.client_port}", "clientPortAddress=127.0.0.1",
                "maxClientCnxns=0", f"minSessionTimeout={2 * zookeeper.TICK_MS}",
                f"maxSessionTimeout={zookeeper.MAX_SESSION_MS}",
                *(m.server_line(myself=m is member) for m in self.members)]

    def _spawn(self, member: ZooKeeperMember) -> None:
        member.data.mkdir(parents=True, exist_ok=True)
        (member.data / "myid").write_text(f"{member.sid}\n")
        member.config.write_text("\n".join(self._config(member)) + "\n")
        argv = [self.java, *zookeeper.JVM_FLAGS, "-cp", os.pathsep.join(self.classpath), QUORUM_MAIN,
                str(member.config)]
        member.proc = spawn(argv, member.log_path, cwd=member.root)

    def stop(self) -> None:
        """Every member and proxy stopped; idempotent. SIGKILL: the data goes with the ensemble."""
        for member in self.members:
            stop(member.proc, signal.SIGKILL)
            member.proc = None
            for proxy in (member.client_proxy, *member.peer_proxies):
                if proxy is not None:
                    proxy.stop()
            member.client_proxy = member.quorum_proxy = member.election_proxy = None

    # --- the members' own view -----------------------------------------------------------------------------

    def member(self, name: str) -> ZooKeeperMember:
        return next(m for m in self.members if m.name == name)

    def member_at(self, hosts: str) -> ZooKeeperMember | None:
        """The member a client's connect string reaches (its proxy, or its own port)."""
        wanted = {port for _, port in zookeeper.parse_hosts(hosts)}
        return next((m for m in self.members if m.client_proxy is not None
                     and wanted & {m.client_proxy.port, m.client_port}), None)

    def mode(self, member: ZooKeeperMember) -> str | None:
        """What the member says it is (`srvr`): "leader" or "follower", or None while it serves no clients
        (looking for a leader, or cut off from the quorum)."""
        return _said(member, "Mode")

    def zxid(self, member: ZooKeeperMember) -> int | None:
        """The last zxid the member has applied (`srvr`), None while it serves no clients."""
        found = _said(member, "Zxid")
        return None if found is None else int(found, 16)

    def _serving(self, member: ZooKeeperMember) -> str:
        mode = self.mode(member)
        if mode is None:
            raise ServiceError(f"{member.name} serves no clients yet")
        return mode

    def leader(self) -> ZooKeeperMember | None:
        """The member that says it leads, when every other live, connected member follows."""
        modes = {}
        for member in self.members:
            if member.pids and member.name not in self.isolated:
                try:
                    modes[member.name] = self.mode(member)
                except OSError:
                    modes[member.name] = None
        leaders = [name for name, mode in modes.items() if mode == "leader"]
        followers = [name for name, mode in modes.items() if mode == "follower"]
        if len(leaders) == 1 and len(leaders) + len(followers) == len(modes):
            return self.member(leaders[0])
        return None

    # --- the fault's levers --------------------------------------------------------------------------------

    def _election_proxy_port(self, sid: int) -> int | None:
        member = next((m for m in self.members if m.sid == sid), None)
        return member.election_proxy.port if member is not None and member.election_proxy is not None else None

    def link_bytes(self, member: ZooKeeperMember) -> int:
        """Bytes relayed so far on the peer links between member and the others."""
        crossing = 0
        for m in self.members:
            for proxy in m.peer_proxies:
                for c in proxy.open_connections():
                    if c.dialer is not None and (c.dialer == member.name) != (m is member):
                        crossing += c.total
        return crossing

    def unproxied_links(self) -> list[str]:
        """Connections between two members that no proxy carries (a partition could not cut them)."""
        import psutil

        real = {port: m.name for m in self.members for port in (m.quorum_port, m.election_port)}
        found = []
        for member, conns in self.member_connections():
            for c in conns:
                if c.raddr and c.status == psutil.CONN_ESTABLISHED and real.get(c.raddr.port) not in (None, member.name):
                    found.append(f"{member.name} -> {real[c.raddr.port]} (port {c.raddr.port})")
        return found
