"""A loopback proxy that sends each new connection to the server whose health check says it is the primary.

What HAProxy does in front of a Patroni cluster (`option httpchk GET /primary`, one backend server per
node): a checker asks each node's REST API every CHECK_EVERY_S, and a node is up while its last answer
was HTTP 200 within REST_TIMEOUT. A stopped agent never answers, so its node is down however well its
postgres still serves. Only new connections are routed: one already open stays where it went (HAProxy
without `on-marked-down shutdown-sessions`), and a connection made while no node is up is closed at once.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Self

from lab.errors import ServiceError
from lab.servers.proxy import BlackholeProxy

CHECK_EVERY_S = 0.5

# One backend server: its port on 127.0.0.1, and its health check (True: it is the primary).
Backend = tuple[int, Callable[[], bool]]


class PrimaryRouter(BlackholeProxy):
    """127.0.0.1:port -> the first backend whose health check last said primary."""

    def __init__(self, backends: list[Backend]):
        super().__init__("127.0.0.1", backends[0][0])
        self.backends = backends
        self.up = [False] * len(backends)
        self.routed: list[int] = []  # the port each connection was sent to, in order

    def start(self) -> Self:
        for i in range(len(self.backends)):
            threading.Thread(target=self._check, args=(i,), name="router-check", daemon=True).start()
        return super().start()

    def _check(self, i: int) -> None:
        check = self.backends[i][1]
        while not self._closed.is_set():
            try:
                self.up[i] = bool(check())
            except Exception:  # a check that cannot ask says down, as a failed HTTP check does
                self.up[i] = False
            self._closed.wait(CHECK_EVERY_S)

    def wait_routable(self, within: float = 10.0, to: int | None = None) -> int:
        """Until a new connection would go to a server (to: that server's port); its port. A router just started
        has asked nobody yet, and one whose primary changed has not yet seen the new one answer."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            found = next((port for (port, _), up in zip(self.backends, self.up) if up), None)
            if found is not None and (to is None or found == to):
                return found
            time.sleep(0.05)
        raise ServiceError(f"the router did not route to {to or 'any server'} within {within:.0f} s (up: {self.up})")

    def _upstream(self) -> tuple[str | None, int] | None:
        for (port, _), up in zip(self.backends, self.up):
            if up:
                self.routed.append(port)
                return ("127.0.0.1", port)
        return None
