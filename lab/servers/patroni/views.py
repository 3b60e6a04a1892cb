"""What the lab's Patroni cluster says of itself: Patroni's view (REST /cluster) and each node's postgres, read on
the node itself, and the waits until the cluster has settled and every replica has caught up."""

from __future__ import annotations

import time

from sqlalchemy import text
from sqlalchemy.engine import URL, Engine

from lab.errors import ServiceError
from lab.servers.clients import parse_pg_dsn, pg_engine

from lab.servers.patroni.node import READY_WITHIN, PatroniNode, PatroniSettings, Secrets, last_line


class PatroniViews:
    """The cluster's own view, for PatroniCluster."""

    nodes: list[PatroniNode]
    settings: PatroniSettings
    secrets: Secrets

    def node_url(self, node: PatroniNode) -> URL:
        return parse_pg_dsn(f"postgresql://postgres:{self.secrets.superuser}@127.0.0.1:{node.port}/postgres")

    def engine(self, node: PatroniNode, timeout: int = 2) -> Engine:
        """An AUTOCOMMIT engine on one node, for reading its state (no pool: each read is a fresh session)."""
        return pg_engine(self.node_url(node), isolation_level="AUTOCOMMIT", poolclass=None,
                         connect_args={"application_name": "locklab-cluster", "connect_timeout": timeout})

    def node(self, name: str) -> PatroniNode:
        return next(n for n in self.nodes if n.name == name)

    def view(self, via: PatroniNode | None = None) -> dict:
        """Patroni's own view of the cluster (REST /cluster), from the first node that answers."""
        for node in [via] if via is not None else self.nodes:
            status, answer = node.rest("/cluster")
            if status == 200:
                return {"via": node.name, "members": [
                    {k: m.get(k) for k in ("name", "role", "state", "timeline", "lag") if k in m}
                    for m in answer.get("members", [])]}
        return {"via": None, "members": []}

    def leader(self, via: PatroniNode | None = None) -> PatroniNode | None:
        """The node Patroni's view names leader, None when there is none."""
        for member in self.view(via)["members"]:
            if member.get("role") == "leader":
                return self.node(member["name"])
        return None

    def server_state(self, node: PatroniNode) -> dict:
        """What the node's postgres says of itself: in recovery or not, and its timeline; or why it did not answer."""
        engine = self.engine(node)
        try:
            with engine.connect() as conn:
                recovery = bool(conn.execute(text("select pg_is_in_recovery()")).scalar())
                # A primary writes on the timeline of its WAL file's name; a replica on the one it receives.
                timeline = conn.execute(text(
                    "select coalesce((select received_tli from pg_stat_wal_receiver), "
                    "(select timeline_id from pg_control_checkpoint()))" if recovery else
                    "select ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int")).scalar()
            return {"in_recovery": recovery, "timeline": timeline}
        except Exception as exc:  # a stopped or restarting server is a state too
            return {"error": type(exc).__name__}
        finally:
            engine.dispose()

    def servers_view(self) -> dict:
        return {node.name: self.server_state(node) for node in self.nodes}

    def wait_healthy(self, within: float = READY_WITHIN) -> dict:
        """Until Patroni names one leader and every other member streams (as sync standby in synchronous
        mode), and exactly that node's postgres is out of recovery. Returns both views."""
        deadline = time.monotonic() + within
        view: dict = {}
        while time.monotonic() < deadline:
            for node in self.nodes:
                if not node.agent_running():
                    raise ServiceError(f"Patroni {node.name} exited: {last_line(node.log_path)}")
            view = self.view()
            members = view["members"]
            leaders = [m for m in members if m.get("role") == "leader" and m.get("state") == "running"]
            wanted = "sync_standby" if self.settings.synchronous_mode else "replica"
            streaming = [m for m in members if m.get("role") == wanted and m.get("state") == "streaming"]
            if len(members) == len(self.nodes) and len(leaders) == 1 and len(streaming) == len(self.nodes) - 1:
                servers = self.servers_view()
                primaries = [name for name, s in servers.items() if s.get("in_recovery") is False]
                if primaries == [leaders[0]["name"]]:
                    return {"patroni": view, "servers": servers}
            time.sleep(0.2)
        said = "; ".join(f"{node.name}: {last_line(node.log_path)}" for node in self.nodes)
        raise ServiceError(f"the Patroni cluster did not settle within {within:.0f} s: {view}; last log lines {said}")

    def wait_caught_up(self, within: float = READY_WITHIN) -> None:
        """Until every replica has replayed what the leader had written when asked."""
        leader = self.leader()
        if leader is None:
            raise ServiceError(f"no leader to catch up with: {self.view()}")
        engine = self.engine(leader)
        try:
            with engine.connect() as conn:
                target: str = conn.execute(text("select pg_current_wal_lsn()::text")).scalar_one()
        finally:
            engine.dispose()
        deadline = time.monotonic() + within
        for node in (n for n in self.nodes if n is not leader):
            replica = self.engine(node)
            try:
                while True:
                    with replica.connect() as conn:
                        behind = conn.execute(text("select pg_wal_lsn_diff(:t, pg_last_wal_replay_lsn())"),
                                              {"t": target}).scalar_one()
                    if behind is not None and behind <= 0:
                        break
                    if time.monotonic() > deadline:
                        raise ServiceError(f"{node.name} did not replay the leader's WAL within {within:.0f} s")
                    time.sleep(0.02)
            finally:
                replica.dispose()
