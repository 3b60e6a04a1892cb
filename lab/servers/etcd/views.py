"""What each member of the lab's etcd cluster says of itself, read on its own client port (never through its
proxy): its status and health, the leader the connected members agree on, and a probe write."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Sequence

from lab.servers.etcd.member import EtcdMember


class EtcdViews:
    """The members' own view, for EtcdCluster."""

    members: Sequence[EtcdMember]
    isolated: frozenset[str]
    _clients: dict

    def _client(self, member: EtcdMember):
        from lab.servers.clients import etcd_client

        if member.name not in self._clients:
            self._clients[member.name] = etcd_client(member.direct, timeout=1)
        return self._clients[member.name]

    @property
    def endpoints(self) -> list[str]:
        """Every member's client endpoint, for a client library that takes several (see the module's docstring)."""
        return [m.endpoint for m in self.members]

    def member(self, name: str) -> EtcdMember:
        return next(m for m in self.members if m.name == name)

    def member_at(self, endpoint: str) -> EtcdMember | None:
        """The member a client endpoint (its proxy, or its own port) reaches."""
        return next((m for m in self.members if endpoint.removeprefix("http://") in (m.endpoint, m.direct)), None)

    def raw_status(self, member: EtcdMember):
        return self._client(member).maintenancestub.Status(rpc().StatusRequest(), 1)

    def status(self, member: EtcdMember) -> dict:
        """What the member itself says: the leader it follows (None: none), its committed raft index and term."""
        raw = self.raw_status(member)
        leader = next((m.name for m in self.members if m.id == raw.leader), None) if raw.leader else None
        return {"leader": leader, "raft_index": int(raw.raftIndex), "raft_term": int(raw.raftTerm)}

    def health(self, member: EtcdMember) -> dict:
        """The member's /health: {"health": "false", "reason": "RAFT NO LEADER"} on the minority side."""
        try:
            with urllib.request.urlopen(f"http://{member.direct}/health", timeout=3) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:  # 503 with the same JSON body when unhealthy
            return json.loads(exc.read() or b"{}")

    def leader(self) -> EtcdMember | None:
        """The leader every live, connected member agrees on, or None."""
        seen = set()
        for member in self.members:
            if member.pids and member.name not in self.isolated:
                seen.add(self.status(member)["leader"])
        return self.member(seen.pop()) if len(seen) == 1 and None not in seen else None

    def probe_write(self, via: EtcdMember) -> int:
        """A put through one member, committed by its side's quorum: returns the revision it got."""
        response = self._client(via).put(f"locklab-probe/{time.monotonic_ns()}", "probe")
        return int(response.header.revision)


def rpc():
    """etcd's v3 protobuf messages, imported when first needed."""
    from pyetcd.etcdrpc import rpc_pb2

    return rpc_pb2
