"""OpenStack tooz's Redis lock, as tooz documents it: a coordinator with its heartbeat, get_lock, acquire.

tooz renews held locks from its heartbeat; when a lock is no longer owned it logs a warning
and tells the caller nothing. The lab reads ownership from the library's redis lock and
changes nothing in how tooz locks. Behind Sentinel (a redis+sentinel:// address) it is given
tooz's own Sentinel form of the URL (`?sentinel=SERVICE&sentinel_fallback=host:port...`), so tooz
builds redis-py's Sentinel master_for client itself.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, urlencode, urlparse

from backends.adapters._tooz import ToozLease
from lab.servers.clients import SentinelAddress, is_sentinel_url, parse_sentinel_url


class ToozRedisLock(ToozLease):
    name = "tooz_redis"
    summary = "OpenStack tooz Redis lock (coordinator heartbeat renews it); no fencing"
    services = ("postgres", "redis")

    # TLS options of a rediss:// URL that tooz's redis driver passes on to redis-py
    TLS_OPTIONS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")

    def _coordinator_url(self) -> str:
        url = self.ctx.lock_services.redis()
        ttl = max(1, int(round(self.ttl)))
        if is_sentinel_url(url):
            return self._sentinel_url(parse_sentinel_url(url), ttl)
        parsed = urlparse(url)
        options: dict[str, int | str] = {"lock_timeout": ttl, "timeout": ttl}
        if parsed.scheme == "rediss":  # tooz knows only redis://; TLS is its ssl option
            options["ssl"] = "true"
            options.update((k, v) for k, v in parse_qsl(parsed.query) if k in self.TLS_OPTIONS)
        # netloc, not host:port: a user and password in the URL must reach tooz too.
        return f"redis://{parsed.netloc}?{urlencode(options)}"

    @staticmethod
    def _sentinel_url(address: SentinelAddress, ttl: int) -> str:
        """tooz's own Sentinel form: the first Sentinel as the host, the others as sentinel_fallback, the service
        as sentinel; the URL's user and password are the servers', sentinel_password the Sentinels'."""
        (host, port), *others = address.sentinels
        options: list[tuple[str, str | int]] = [("sentinel", address.service), ("db", address.db),
                                                ("lock_timeout", ttl), ("timeout", ttl)]
        options += [("sentinel_fallback", f"{h}:{p}") for h, p in others]
        if address.sentinel_password is not None:
            options.append(("sentinel_password", address.sentinel_password))
        user = quote(address.username or "", safe="")
        auth = f"{user}:{quote(address.password, safe='')}@" if address.password is not None else \
            (f"{user}@" if user else "")
        return f"redis://{auth}{host}:{port}?{urlencode(options)}"

    def _owned(self) -> bool:
        return self.lock._lock.owned()  # the redis-py lock tooz holds: read, never changed
