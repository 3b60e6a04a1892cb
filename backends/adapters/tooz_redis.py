"""OpenStack tooz's Redis lock, as tooz documents it: a coordinator with its heartbeat, get_lock, acquire.

tooz renews held locks from its heartbeat; when a lock is no longer owned it logs a warning
and tells the caller nothing. The lab reads ownership from the library's redis lock and
changes nothing in how tooz locks.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlparse

from backends.adapters._tooz import ToozLease


class ToozRedisLock(ToozLease):
    name = "tooz_redis"
    summary = "OpenStack tooz Redis lock (coordinator heartbeat renews it); no fencing"
    services = ("postgres", "redis")

    # TLS options of a rediss:// URL that tooz's redis driver passes on to redis-py
    TLS_OPTIONS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")

    def _coordinator_url(self) -> str:
        parsed = urlparse(self.ctx.lock_services.redis())
        ttl = max(1, int(round(self.ttl)))
        options: dict[str, int | str] = {"lock_timeout": ttl, "timeout": ttl}
        if parsed.scheme == "rediss":  # tooz knows only redis://; TLS is its ssl option
            options["ssl"] = "true"
            options.update((k, v) for k, v in parse_qsl(parsed.query) if k in self.TLS_OPTIONS)
        # netloc, not host:port: a user and password in the URL must reach tooz too.
        return f"redis://{parsed.netloc}?{urlencode(options)}"

    def _owned(self) -> bool:
        return self.lock._lock.owned()  # the redis-py lock tooz holds: read, never changed
