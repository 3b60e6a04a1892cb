"""Who a server is right now: what changes when it restarts, read over its own protocol.

A restart the lab did not perform itself (a user's command, a cluster manager's switchover)
is confirmed by comparing these before and after: PostgreSQL's postmaster start time, each
Redis server's run_id, etcd's process start time and leader, each ZooKeeper server's start (its
`mntr` uptime taken from the clock). No process id is needed, so it works on servers on other hosts.
"""

from __future__ import annotations

import time
import urllib.request

from sqlalchemy import text

from lab.servers import zookeeper
from lab.servers.clients import etcd_client, first_line, pg_engine, redis_client
from lab.servers.services import Services

TIMEOUT = 3.0
STARTED_APART_S = 0.5  # a ZooKeeper start read twice from its uptime differs by clock steps, never by this


def server_identity(services: Services, service: str) -> dict:
    """What identifies the running server(s) of a service; raises when a server does not answer."""
    if service == "postgres":
        engine = pg_engine(services.pg(), poolclass=None, isolation_level="AUTOCOMMIT",
                           connect_args={"connect_timeout": int(TIMEOUT)})
        try:
            with engine.connect() as conn:
                row = conn.execute(text("select pg_postmaster_start_time()::text as started, "
                                        "coalesce(inet_server_addr()::text, 'local') as address, "
                                        "pg_is_in_recovery() as standby")).mappings().one()
            return dict(row)
        finally:
            engine.dispose()
    if service in ("redis", "redlock"):
        urls = [services.redis()] if service == "redis" else services.redlock()
        out = {}
        for i, url in enumerate(urls):
            client = redis_client(url, socket_timeout=TIMEOUT)
            try:
                info = client.info("server")
                out[f"server{i}"] = {"run_id": info["run_id"], "uptime_s": info["uptime_in_seconds"]}
            finally:
                client.close()
        return out
    if service == "zookeeper":
        return {f"server{i}": _zookeeper_started(host, port)
                for i, (host, port) in enumerate(zookeeper.parse_hosts(services.zookeeper()))}
    client = etcd_client(services.etcd(), timeout=TIMEOUT)
    try:
        status = client.status()
        leader = status.leader.id if hasattr(status.leader, "id") else str(status.leader)
        term = status.raft_term
    finally:
        client.close()
    return {"process_start_time": _etcd_start_time(services.etcd()), "leader": leader, "raft_term": term}


def _zookeeper_started(host: str, port: int) -> dict:
    """When this ZooKeeper server started, from `mntr`'s zk_uptime (raises when `mntr` is not allowed)."""
    uptime = zookeeper.uptime_ms(host, port)
    if uptime is None:
        raise RuntimeError(f"ZooKeeper at {host}:{port} does not answer mntr (4lw.commands.whitelist)")
    return {"started": round(time.time() - uptime / 1000, 1), "uptime_ms": uptime}


def _etcd_start_time(endpoint: str) -> str | None:
    """process_start_time_seconds from the member's /metrics (served on its client port)."""
    url = endpoint if endpoint.startswith("http") else f"http://{endpoint}"
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=TIMEOUT) as response:  # noqa: S310 - the user's endpoint
            for line in response.read().decode().splitlines():
                if line.startswith("process_start_time_seconds"):
                    return line.split()[-1]
    except OSError:
        return None
    return None


def restarted(before: dict, after: dict, service: str) -> bool:
    """Whether every server of the service came back as a different process (each Redlock master too)."""
    if service in ("redis", "redlock"):
        return all(after.get(name, {}).get("run_id") != server["run_id"] for name, server in before.items())
    if service == "zookeeper":
        return all(after.get(name, {}).get("started", 0) - server["started"] > STARTED_APART_S
                   for name, server in before.items())
    keys = ("started",) if service == "postgres" else ("process_start_time", "leader")
    return any(before.get(k) != after.get(k) for k in keys)


def try_identity(services: Services, service: str) -> tuple[dict | None, str | None]:
    """server_identity, or (None, why) while the server does not answer (it is restarting)."""
    try:
        return server_identity(services, service), None
    except Exception as exc:  # any failure to answer means "not back yet" to a caller that polls
        return None, first_line(exc)
