"""A Redis' persistence, replicas, min-replicas-to-write and Sentinel, reading only (INFO, CONFIG GET, CLIENT LIST,
and SENTINEL MASTER on a Sentinel).

Given a redis+sentinel:// address it asks the Sentinels for the primary, then reads the primary; given a plain
redis:// address it reads that server and sees Sentinel by the connections Sentinels name after themselves
(CLIENT SETNAME sentinel-<id>-cmd). A command the server refuses (an ACL, a renamed CONFIG) leaves its fact unknown
with the server's words.
"""

from __future__ import annotations

from lab.errors import LabError, ServiceError
from lab.servers.clients import (first_line, is_sentinel_url, no_retry, parse_sentinel_url, redact_text, server_url,
                                 sentinel_manager)
from lab.stack.description import Appendfsync, Redis, Redlock, Sentinel, Unknown

TIMEOUT_S = 5.0


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _client(url: str):
    import redis

    try:
        return redis.Redis.from_url(url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S, retry=no_retry())
    except ValueError as exc:
        raise LabError(f"not a Redis URL (redis://[:password@]host:port[/db] or redis+sentinel://...): "
                       f"{redact_text(url)} ({first_line(exc)})") from None


def _config(client, name: str) -> str | Unknown:
    try:
        found = client.config_get(name)
    except Exception as exc:  # an ACL without +config, a renamed command: the fact stays unknown, with why
        return Unknown(f"CONFIG GET {name} refused: {first_line(exc)}")
    value = found.get(name) if isinstance(found, dict) else None
    return Unknown(f"CONFIG GET {name} gave nothing") if value is None else _text(value)


def _appendfsync(client) -> Appendfsync | Unknown:
    appendonly = _config(client, "appendonly")
    if isinstance(appendonly, Unknown):
        try:
            enabled = client.info("persistence").get("aof_enabled")
        except Exception:
            return appendonly
        if not enabled:
            return Appendfsync.OFF
        return Unknown(f"an append-only file is on (INFO), but its fsync is not readable ({appendonly.why})")
    if appendonly != "yes":
        return Appendfsync.OFF
    mode = _config(client, "appendfsync")
    if isinstance(mode, Unknown):
        return mode
    try:
        return Appendfsync(mode)
    except ValueError:
        return Unknown(f"appendfsync {mode!r} is not one this lab knows")


def _number(client, name: str) -> int | Unknown:
    value = _config(client, name)
    if isinstance(value, Unknown):
        return value
    return int(value) if value.strip().isdigit() else Unknown(f"{name} is {value!r}")


def _sentinels_connected(client) -> Sentinel | None | Unknown:
    """Sentinel as the server sees it: each Sentinel keeps a command connection named sentinel-<id>-cmd."""
    try:
        clients = client.client_list()
    except Exception as exc:
        return Unknown(f"CLIENT LIST refused: {first_line(exc)}; give the Sentinels' redis+sentinel:// address")
    ids = {c.get("name", "")[len("sentinel-"):-len("-cmd")] for c in clients
           if c.get("name", "").startswith("sentinel-") and c.get("name", "").endswith("-cmd")}
    if not ids:
        return None
    words = "not readable from the server: give the Sentinels' redis+sentinel:// address"
    return Sentinel(sentinels=len(ids), quorum=Unknown(words), service=Unknown(words))


def _read_server(url: str, watching: Sentinel | None = None) -> Redis:
    """One server; watching: the Sentinels as they described themselves, when the address named them."""
    client = _client(url)
    shown = redact_text(url)
    try:
        try:
            server = client.info("server")
        except Exception as exc:
            raise ServiceError(f"redis at {shown} is unreachable: {first_line(exc)}") from None
        if server.get("redis_mode") == "sentinel":
            raise LabError(f"{shown} is a Sentinel: give redis+sentinel://[:password@]host:port/SERVICE")
        replication = client.info("replication")
        replicas: int | Unknown
        if replication.get("role") == "master":
            replicas = int(replication.get("connected_slaves", 0))
        else:
            replicas = Unknown(f"the URL reaches a replica of {replication.get('master_host')}:"
                               f"{replication.get('master_port')}: give the primary's")
        save = _config(client, "save")
        return Redis(version=_text(server.get("redis_version", "")) or Unknown("INFO named no version"),
                     appendfsync=_appendfsync(client),
                     rdb_snapshots=save if isinstance(save, Unknown) else bool(save.strip()),
                     replicas=replicas, min_replicas_to_write=_number(client, "min-replicas-to-write"),
                     sentinel=watching if watching is not None else _sentinels_connected(client))
    finally:
        client.close()


def read_redis(url: str) -> Redis:
    """The Redis at a redis:// address, or the primary of a redis+sentinel:// one; ServiceError (one line, no
    password) when it cannot be reached, LabError for an address that is not one."""
    if not is_sentinel_url(url):
        return _read_server(url)
    address = parse_sentinel_url(url)
    manager = sentinel_manager(address, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S)
    master, why = None, "no Sentinel answered"
    for sentinel in manager.sentinels:
        try:
            master = sentinel.sentinel_master(address.service)
            break
        except Exception as exc:
            why = first_line(exc)
        finally:
            sentinel.close()
    if master is None:
        raise ServiceError(f"the Sentinels at {redact_text(url)} did not name the primary of {address.service}: {why}")
    watching = Sentinel(sentinels=int(master.get("num-other-sentinels", 0)) + 1, quorum=int(master.get("quorum", 0)),
                        service=address.service)
    primary = server_url(address, _text(master["ip"]), int(master["port"]))
    return _read_server(primary, watching)


def read_redlock(urls: list[str]) -> Redlock:
    """Independent masters, each read as read_redis does; the least durable one's append-only file counts."""
    found = [read_redis(url) for url in urls]
    fsyncs = [r.appendfsync for r in found]
    unknown = next((f for f in fsyncs if isinstance(f, Unknown)), None)
    order = list(Appendfsync)
    weakest = min((f for f in fsyncs if isinstance(f, Appendfsync)), key=order.index, default=Appendfsync.OFF)
    return Redlock(masters=len(found), appendfsync=unknown if unknown is not None and weakest is not Appendfsync.OFF
                   else weakest)
