"""What both ZooKeeper locks share: kazoo's Lock on a session of its own, with the state listener its documentation asks for.

kazoo's Lock is an ephemeral sequential znode under the lock's path: the lowest holds the lock, and
ZooKeeper deletes it when the session that made it ends. A session lives while its client pings within
the session timeout (kazoo does that from its connection thread, every third of the timeout), so the
right is a lease whose TTL is the session timeout. kazoo's documentation says to add a connection
state listener and react to SUSPENDED (the connection dropped: the lock may be lost) and LOST (the
session expired: it is lost). The listener here reports each one to the holder (lab/checkers/told.py)
and changes nothing: what the application then does is the application's.

held() and release() ask the server whether the lock's node still exists and belongs to this client's
current session (a client that lost its session starts a new one by itself). kazoo's own release()
swallows NoNodeError and returns True for a node the server already deleted, so the check comes first.
"""

from __future__ import annotations

import socket
import threading
import time

from kazoo.client import KazooClient
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.protocol.states import KazooState

from backends._lease import LeaseBackend
from backends.base import BareCall
from lab.declarations.capabilities import Capability
from lab.checkers import told
from lab.errors import LockLost
from lab.servers.zookeeper import server as zookeeper

LOCKS = "/locklab"  # every lab lock's parent znode


def lock_path(key: str) -> str:
    """The lock's znode path for a lab key (a key may hold '/', which would nest znodes)."""
    return f"{LOCKS}/{key.replace('/', '|')}"


class _StallableHandler(SequentialThreadingHandler):
    """kazoo's default threading handler; while the lab stalls the run (suspend), its connection thread's
    next select() waits the stall out, as that thread would in a paused process: no ping, no read.
    unstall() ends a stall at once (closing the client needs that thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.stalled_until = 0.0
        self._unstalled = threading.Event()

    def stall(self, seconds: float) -> None:
        self._unstalled.clear()
        self.stalled_until = time.monotonic() + seconds

    def unstall(self) -> None:
        self.stalled_until = 0.0
        self._unstalled.set()

    def select(self, *args, **kwargs):
        wait = self.stalled_until - time.monotonic()
        if wait > 0:
            self._unstalled.wait(wait)
        return super().select(*args, **kwargs)


_granted: dict[str, float] = {}  # connect string -> the session timeout its server grants for one asked


def granted_timeout(hosts: str, asked: float) -> float:
    """The session timeout a ZooKeeper grants for `asked` seconds: clamped to its min and max session
    timeouts (`conf`), as the server negotiates it; the asked one when the server does not say."""
    key = f"{hosts}|{asked}"
    if key not in _granted:
        host, port = zookeeper.parse_hosts(hosts)[0]
        conf = zookeeper.settings(host, port)
        low, high = int(conf.get("minSessionTimeout", 0)), int(conf.get("maxSessionTimeout", 0)) or None
        ms = max(low, int(asked * 1000))
        _granted[key] = (min(ms, high) if high else ms) / 1000
    return _granted[key]


class KazooLease(LeaseBackend):
    """kazoo's Lock: acquire(blocking=False), release(); kazoo keeps its session alive itself."""

    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.EXCLUSION})
    services = ("postgres", "zookeeper")
    renews = False  # kazoo's connection thread pings; nothing for the lab's keep-alive to renew

    @classmethod
    def cannot_run(cls, services) -> str | None:
        if services.zk_hosts is None:
            return services.unavailable.get("zookeeper") or "no ZooKeeper among this run's servers"
        return None

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self.ttl = granted_timeout(ctx.services.zookeeper(), self.ttl)  # the server's view, never through a proxy
        self.path = lock_path(key)
        self.handler = _StallableHandler()
        self.client = KazooClient(hosts=ctx.lock_services.zookeeper(), timeout=self.ttl, handler=self.handler)
        self.client.add_listener(self._state_changed)
        self.client.start(timeout=max(5.0, self.ttl))
        self.lock = self.client.Lock(self.path, f"locklab {key}")

    def _state_changed(self, state: str) -> None:
        """kazoo's connection state listener (on its callback thread): SUSPENDED and LOST say the lock may
        be, or is, gone; CONNECTED says nothing about the lock."""
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            told.callback("its state listener", str(state))

    def _node(self) -> str | None:
        return f"{self.path}/{self.lock.node}" if self.lock.is_acquired and self.lock.node else None

    def _try_acquire(self) -> int | None:
        return 0 if self.lock.acquire(blocking=False) else None

    def _renew(self) -> bool:
        return False  # never called: renews is False

    def _owned(self) -> bool:
        """The server says the lock's node exists and belongs to this client's current session."""
        node, session = self._node(), self.client.client_id
        if node is None or session is None:
            return False
        stat = self.client.exists_async(node).get(timeout=max(1.0, self.ttl))
        return stat is not None and stat.ephemeralOwner == session[0]

    def _release(self) -> bool:
        """kazoo's release() when the server says the node is still ours; False when it is not, or no answer
        came (kazoo's release() would delete a node that is no longer ours and return True all the same:
        its NoNodeError is swallowed). The stale Lock object is then replaced by a fresh one for the next
        acquire; a node of ours the server still had goes with the session when the client stops."""
        try:
            owned = self._owned()
        except Exception:  # a connection that does not answer cannot vouch for the lock
            owned = False
        if owned:
            self.lock.release()
        else:
            self.lock = self.client.Lock(self.path, f"locklab {self.key}")
        return owned

    def release(self) -> None:
        try:
            super().release()
        except LockLost as exc:
            if exc.told != "false":
                raise
            raise LockLost("its lock node was gone from ZooKeeper (or not this session's) before release; kazoo's "
                           "own release() returns True for that", told="false") from None

    def bare_call(self, key: str) -> BareCall | None:
        """kazoo's Lock on a client of its own, started beforehand: acquire(blocking=False) and release()."""
        client = KazooClient(hosts=self.ctx.lock_services.zookeeper(), timeout=self.ttl)
        client.start(timeout=max(5.0, self.ttl))
        lock = client.Lock(lock_path(key), "locklab bare call")

        def close() -> None:
            client.stop()
            client.close()

        return BareCall(self.bare_words, lambda: self._bare_acquire(client, lock), lock.release, close)

    bare_words = "kazoo Lock.acquire(blocking=False); Lock.release()"

    def _bare_acquire(self, client: KazooClient, lock) -> object:
        return lock.acquire(blocking=False)

    def suspend(self, seconds: float) -> None:
        super().suspend(seconds)
        self.handler.stall(seconds)

    def abandon(self) -> None:
        """A killed process: its connection closes and no CloseSession is sent, so ZooKeeper keeps the
        session, and the lock's node, until the session times out."""
        self.client.remove_listener(self._state_changed)
        self.client._stopped.set()  # kazoo's own flag: its loop stops reconnecting, and stop() sends nothing
        sock = self.client._connection._socket
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        super().abandon()

    def close(self) -> None:
        super().close()
        self.client.remove_listener(self._state_changed)  # stopping the client is no news of the lock
        self.handler.unstall()
        if self.client._stopped.is_set():  # after abandon(): end its threads without a word to the server
            self.client._safe_close()
        else:
            self.client.stop()
        self.client.close()
