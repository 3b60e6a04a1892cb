"""The lock's Redis restarted with an append-only file fsynced on every write (appendfsync always).

The control for `restart`: a default Redis forgets every key when it restarts, lock and fence
counter included, so the next token can be lower than one already written. With
`appendonly yes, appendfsync always` the keys, the counter with them, come back. prepare()
turns the AOF on before the holder takes its lock (and waits for Redis to write it), inject()
restarts Redis with the same settings. Embedded Redis only: the trial's own (lab/faults/restart.py),
stopped with the trial; on the run's, close() turns the AOF off again so later scenarios meet the
default Redis.
"""

from __future__ import annotations

import time

from lab.faults.base import FaultNotConfirmed, Target
from lab.faults.restart import Restart
from lab.servers.clients import redis_client
from lab.servers.redis.server import EmbeddedRedis
from lab.servers.services import Services


class RestartWithAof(Restart):
    name = "restart_aof"
    label = "Redis restarted with appendfsync always"
    commandable = False  # it sets the server's persistence itself, so it needs a Redis the lab started

    def __init__(self):
        super().__init__()
        self._server = None
        self._url: str | None = None

    def _client(self):
        """A client of the Redis whose append-only file prepare() turned on."""
        if self._url is None:
            raise FaultNotConfirmed("the append-only file was never turned on (prepare() did not run)")
        return redis_client(self._url, socket_timeout=5)

    def applies_to(self, backend_cls) -> str | None:
        if backend_cls.lock_service != "redis":
            return "an append-only file is a Redis setting; this lock is not in a single Redis"
        return None

    def prepare(self, services: Services, backend_cls) -> None:
        super().prepare(services, backend_cls)  # the trial's own Redis, when the lab started the run's
        if isinstance(self._own, EmbeddedRedis):
            self._server, self._url = self._own, self._own.url
        else:
            self._server, self._url = services.embedded["redis"], services.redis()
        client = self._client()
        try:
            client.config_set("appendfsync", "always")
            client.config_set("appendonly", "yes")  # starts a rewrite of the whole dataset into the file
            deadline = time.monotonic() + 10
            while client.info("persistence").get("aof_rewrite_in_progress") or \
                    client.info("persistence").get("aof_rewrite_scheduled"):
                if time.monotonic() > deadline:
                    raise FaultNotConfirmed("Redis did not finish writing its append-only file within 10 s")
                time.sleep(0.02)  # Redis has no event for a finished rewrite; INFO is polled
        finally:
            client.close()
        self._server.appendfsync_always = True

    def confirm(self, target: Target) -> dict:
        evidence = super().confirm(target)
        client = self._client()
        try:
            persistence = client.info("persistence")
        finally:
            client.close()
        if not persistence.get("aof_enabled"):
            raise FaultNotConfirmed("Redis came back without its append-only file")
        return {**evidence, "aof_enabled": 1, "appendfsync": "always"}

    def close(self) -> None:
        if self._own is not None:  # the trial's own Redis goes with it
            self._server = None
            super().close()
            return
        if self._server is None:
            return
        self._server.appendfsync_always = False
        client = self._client()
        try:
            client.config_set("appendonly", "no")
            client.config_set("appendfsync", "everysec")
        finally:
            client.close()
