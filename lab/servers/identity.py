"""Who a server is right now: what changes when it restarts, read over its own protocol.

A restart the lab did not perform itself (a user's command, a cluster manager's switchover)
is confirmed by comparing these before and after: PostgreSQL's postmaster start time, each
Redis server's run_id, etcd's process start time and leader, each ZooKeeper server's start (its
`mntr` uptime taken from the clock). No process id is needed, so it works on servers on other hosts.
A failover is confirmed the same way by which server is the primary (primary_identity): the node
that takes writes, the Sentinels' answer, etcd's leader. A PostgreSQL named by a multi-host URL is asked
host by host, since in a split brain (a manager's agent paused, a primary cut from its DCS) two nodes
take writes and the promoted one is told apart only by its later timeline.
"""

from __future__ import annotations

import time
import urllib.request
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import text
from sqlalchemy.pool import NullPool

from lab.errors import ServiceError
from lab.servers.mariadb import sql as mariadb_sql
from lab.servers.zookeeper import server as zookeeper
from lab.servers.clients import (
    SentinelAddress,
    etcd_client,
    first_line,
    is_sentinel_url,
    no_retry,
    one_row,
    parse_sentinel_url,
    pg_engine,
    pg_hosts,
    redis_client,
    server_url,
)
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
    if service == "mariadb":
        return _mariadb_started(services)
    client = etcd_client(services.etcd(), timeout=TIMEOUT)
    try:
        status = client.status()
        term = status.raft_term
    finally:
        client.close()
    return {"process_start_time": _etcd_start_time(services.etcd()), "leader": _etcd_leader_id(status),
            "raft_term": term}


def _zookeeper_started(host: str, port: int) -> dict:
    """When this ZooKeeper server started, from `mntr`'s zk_uptime (raises when `mntr` is not allowed)."""
    uptime = zookeeper.uptime_ms(host, port)
    if uptime is None:
        raise RuntimeError(f"ZooKeeper at {host}:{port} does not answer mntr (4lw.commands.whitelist)")
    return {"started": round(time.time() - uptime / 1000, 1), "uptime_ms": uptime}


def _mariadb_started(services: Services) -> dict:
    """When this MariaDB server process started, from its Uptime (whole seconds) and the server's own clock."""
    engine = mariadb_sql.mariadb_engine(services.mariadb(), pin=False, poolclass=NullPool,
                                        connect_args={"connect_timeout": int(TIMEOUT)})
    row = one_row(engine, "select unix_timestamp() - variable_value, variable_value, @@hostname, @@port "
                          "from information_schema.global_status where variable_name = 'UPTIME'")
    return {"started": int(row[0]), "uptime_s": int(row[1]), "host": row[2], "port": int(row[3])}


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
    if service == "mariadb":  # its start is known to a second either way: two apart, or it is not told apart
        return after["started"] - before["started"] > 1
    keys = ("started",) if service == "postgres" else ("process_start_time", "leader")
    return any(before.get(k) != after.get(k) for k in keys)


def try_identity(services: Services, service: str) -> tuple[dict | None, str | None]:
    """server_identity, or (None, why) while the server does not answer (it is restarting)."""
    try:
        return server_identity(services, service), None
    except Exception as exc:  # any failure to answer means "not back yet" to a caller that polls
        return None, first_line(exc)


# --- who is the primary (or the leader): what a cluster manager's failover changes ------------------------

def primary_identity(services: Services, service: str) -> dict:
    """Which server takes writes now, read over the servers' own protocols; raises while none answers.

    PostgreSQL over a multi-host URL: every host asked on its own, the primary being the one out of recovery
    on the latest timeline (the first in the URL's order on a tie), with every host's answer (`nodes`) and
    those that take writes (`primaries`: two in a split brain). Over one address: the node a read-write session
    lands on, with its timeline and whether it is in recovery. Redis: through Sentinel, the address a
    majority of the Sentinels give (get-master-addr-by-name); else the URL's server; then that server's
    ROLE and run_id. etcd: the leader's member id and raft term, and each member's client URL.
    """
    if service == "postgres" and len(pg_hosts(services.pg())) > 1:
        return _pg_primary_among_hosts(services)
    if service == "postgres":
        writable = services.pg().update_query_dict({"target_session_attrs": "read-write"})
        engine = pg_engine(writable, poolclass=None, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": int(TIMEOUT)})
        try:
            with engine.connect() as conn:
                row = conn.execute(text(
                    f"select host(inet_server_addr()) as host, inet_server_port() as port, "
                    f"pg_is_in_recovery() as in_recovery, {_TIMELINE} as wal_file, "
                    f"pg_postmaster_start_time()::text as started")).mappings().one()
        finally:
            engine.dispose()
        return {"address": f"{row['host'] or 'local'}:{row['port']}", "in_recovery": bool(row["in_recovery"]),
                "timeline": _timeline(row["wal_file"]), "started": row["started"]}
    if service == "redis":
        url = services.redis()
        out: dict = {}
        if is_sentinel_url(url):
            address = parse_sentinel_url(url)
            named = sentinels_name(address)
            out["sentinels"] = {k: list(v) if v else None for k, v in named.items()}
            votes = [v for v in named.values() if v is not None]
            chosen = max(set(votes), key=votes.count) if votes else None
            if chosen is None or votes.count(chosen) <= len(named) // 2:
                raise ServiceError(f"no majority of the Sentinels names a primary: {out['sentinels']}")
            url = server_url(address, *chosen)
            out["address"] = f"{chosen[0]}:{chosen[1]}"
        else:
            parts = urlsplit(url)
            out["address"] = f"{parts.hostname}:{parts.port or 6379}"
        out.update(redis_role(url))
        return out
    client = etcd_client(services.etcd(), timeout=TIMEOUT)
    try:
        status = client.status()
        members = {str(m.id): list(m.client_urls) for m in client.members}
    finally:
        client.close()
    return {"leader": _etcd_leader_id(status), "raft_term": int(status.raft_term), "members": members}


def _etcd_leader_id(status) -> str | None:
    """The leader's member id as a string, or None while the cluster has no leader (mid election).

    The etcd3 client gives None (or a member id of 0) for the leader while an election runs; naming that
    "None" would read as a new leader."""
    leader = getattr(status.leader, "id", status.leader)
    return None if leader in (None, 0, "0") else str(leader)


def _pg_primary_among_hosts(services: Services) -> dict:
    """The primary of a multi-host URL, read host by host (see primary_identity); raises while none takes writes."""
    nodes: dict[str, dict] = {}
    for host, port in pg_hosts(services.pg()):
        address = f"{host or 'local'}:{port}"
        try:
            nodes[address] = pg_node_state(services, host, port)
        except Exception as exc:  # a node restarting, rewinding or paused answers nothing: it is not a primary now
            nodes[address] = {"error": type(exc).__name__}
    primaries = [a for a, state in nodes.items() if state.get("in_recovery") is False]
    if not primaries:
        raise ServiceError(f"no host of the URL takes writes: {nodes}")
    chosen = max(primaries, key=lambda a: nodes[a]["timeline"] or 0)  # max() keeps the first of equals
    return {"address": chosen, **nodes[chosen], "primaries": primaries, "nodes": nodes}


def pg_node_state(services: Services, host: str | None, port: int) -> dict:
    """What the PostgreSQL at one host of the service's URL says of itself (the URL's user, password and database):
    in recovery or not, the timeline it writes on, and when its postmaster started; raises when it does not answer."""
    engine = pg_engine(services.pg().set(host=host, port=port, query={}), poolclass=None,
                       isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": int(TIMEOUT)})
    try:
        with engine.connect() as conn:
            row = conn.execute(text(f"select pg_is_in_recovery() as in_recovery, {_TIMELINE} as wal_file, "
                                    f"pg_postmaster_start_time()::text as started")).mappings().one()
    finally:
        engine.dispose()
    return {"in_recovery": bool(row["in_recovery"]), "timeline": _timeline(row["wal_file"]), "started": row["started"]}


# The timeline a server writes on: the first eight hex digits of its current WAL file's name (any role may ask;
# a standby writes none, so it has none).
_TIMELINE = "case when pg_is_in_recovery() then null else pg_walfile_name(pg_current_wal_lsn()) end"


def _timeline(wal_file: str | None) -> int | None:
    return None if wal_file is None else int(wal_file[:8], 16)


def redis_role(url: str) -> dict:
    """ROLE and run_id of the one server at a plain Redis URL."""
    client = redis_client(url, socket_timeout=TIMEOUT, retry=no_retry())
    try:
        reply = client.execute_command("ROLE")
        run_id = client.info("server")["run_id"]
    finally:
        client.close()
    role = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
    return {"role": role, "run_id": run_id}


def sentinels_name(address: SentinelAddress) -> dict[str, tuple[str, int] | None]:
    """What each Sentinel answers to get-master-addr-by-name (None: it did not answer, or named none)."""
    import redis

    out: dict[str, tuple[str, int] | None] = {}
    for host, port in address.sentinels:
        client = redis.Redis(host=host, port=port, password=address.sentinel_password, socket_timeout=TIMEOUT,
                             socket_connect_timeout=TIMEOUT, retry=no_retry())
        try:
            answer = client.execute_command("SENTINEL", "get-master-addr-by-name", address.service)
            out[f"{host}:{port}"] = (_text(answer[0]), int(answer[1])) if answer else None
        except Exception:  # a Sentinel that does not answer names nobody
            out[f"{host}:{port}"] = None
        finally:
            client.close()
    return out


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def is_new_primary(before: dict, after: dict, service: str) -> bool:
    """Whether after names another primary (or leader) than before: a failover happened."""
    if service == "postgres":
        return not after["in_recovery"] and (after["address"] != before["address"]
                                             or (after["timeline"] or 0) > (before["timeline"] or 0))
    if service == "redis":
        return after["role"] == "master" and (after["address"] != before["address"]
                                              or after["run_id"] != before["run_id"])
    return after["leader"] is not None and after["leader"] != before["leader"] and (
        after.get("raft_term") is None or before.get("raft_term") is None or after["raft_term"] > before["raft_term"])


def old_primary_answer(services: Services, service: str, before: dict) -> dict:
    """What the primary (or leader) of before says now, asked at its own address; raises when it does not answer.

    PostgreSQL: whether it is in recovery (taken back as a standby) and its timeline. Redis: its ROLE and
    run_id (with the URL's credentials). etcd: the leader it follows now, asked at one of its client URLs."""
    if service == "postgres":
        host, _, port = before["address"].rpartition(":")
        state = pg_node_state(services, host, int(port))
        return {"in_recovery": state["in_recovery"], "timeline": state["timeline"]}
    if service == "redis":
        host, _, port = before["address"].rpartition(":")
        url = services.redis()
        if is_sentinel_url(url):
            return redis_role(server_url(parse_sentinel_url(url), host, int(port)))
        parts = urlsplit(url)
        userinfo = parts.netloc.rpartition("@")[0]
        return redis_role(urlunsplit((parts.scheme, (userinfo + "@" if userinfo else "") + f"{host}:{port}",
                                      parts.path, parts.query, parts.fragment)))
    urls = (before.get("members") or {}).get(before["leader"]) or []
    for url in urls:
        client = etcd_client(url.removeprefix("http://"), timeout=TIMEOUT)
        try:
            status = client.status()
            leader = status.leader.id if hasattr(status.leader, "id") else status.leader
            return {"leader": str(leader), "raft_term": int(status.raft_term)}
        finally:
            client.close()
    raise ServiceError(f"the old etcd leader {before['leader']} has no client URL to ask")
