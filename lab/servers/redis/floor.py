"""Redis's floor: PING through redis-py, as its locks' client sends it, and PING on a bare socket beside it.

Redlock's masters are independent Redis servers: its floor is one master's."""

from __future__ import annotations

import socket
from urllib.parse import unquote, urlsplit

from lab.servers.clients import redis_client
from lab.servers.floor_probe import FloorProbe
from lab.servers.services import Services


class RedisFloor(FloorProbe):
    service = "redis"
    main = "PING (redis-py)"

    def url(self, services: Services) -> str:
        return services.redis()

    def open(self, services: Services, key: str, commit_table: str) -> None:
        url = self.url(services)
        client = redis_client(url)
        self._closers.append(client.close)
        raw = raw_redis(url)
        self._closers.append(raw.close)
        self.calls[self.main] = client.ping

        def raw_ping() -> None:
            raw.sendall(b"PING\r\n")
            if raw.recv(64) != b"+PONG\r\n":
                raise RuntimeError("raw PING: no +PONG")

        self.calls["PING (raw socket)"] = raw_ping


class RedlockFloor(RedisFloor):
    service = "redlock"
    main = "PING (redis-py, one master)"

    def url(self, services: Services) -> str:
        return services.redlock()[0]


def raw_redis(url: str) -> socket.socket:
    """A plain TCP connection to Redis, authenticated as the URL says: PING with nothing in between."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port or 6379), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if parts.password:
        words = [unquote(parts.username), unquote(parts.password)] if parts.username else [unquote(parts.password)]
        command = [b"AUTH", *(w.encode() for w in words)]
        sock.sendall(b"*%d\r\n" % len(command) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in command))
        if not sock.recv(64).startswith(b"+OK"):
            sock.close()
            raise RuntimeError("raw socket: Redis refused AUTH")
    return sock
