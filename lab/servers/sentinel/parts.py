"""What every piece of the Sentinel service's code knows of it: its two servers, its Sentinels, the proxy in front of
the first, and how the lab reaches each server on its real port."""

from __future__ import annotations

from lab.servers.clients import no_retry, redis_client
from lab.servers.peer_proxy import PeerProxy
from lab.servers.redis.server import EmbeddedRedis
from lab.servers.sentinel.process import EmbeddedSentinel


class SentinelParts:
    """The service's parts, as SentinelRedis makes them."""

    first: EmbeddedRedis
    second: EmbeddedRedis
    sentinels: list[EmbeddedSentinel]
    fronts: dict[str, PeerProxy]  # server name -> the proxy that is its address for everyone
    isolated: str | None  # the server cut from the Sentinels and the other server

    @property
    def servers(self) -> tuple[EmbeddedRedis, EmbeddedRedis]:
        return self.first, self.second

    def label(self, server: EmbeddedRedis) -> str:
        """"first" (the primary the trials start with) or "second" (its replica)."""
        return "first" if server is self.first else "second"

    def client(self, server: EmbeddedRedis, timeout: float = 2.0):
        """A client on the server's real port (never through the proxy), without retries."""
        return redis_client(server.url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=no_retry())

    def address(self, server: EmbeddedRedis) -> tuple[str, int]:
        """The address the Sentinels and clients know the server by: the first's proxy, the second's own port."""
        front = self.fronts.get(self.label(server))
        return "127.0.0.1", front.port if front is not None else server.port
