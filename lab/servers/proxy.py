"""A loopback TCP proxy that can cut a connection the way a network does: no RST, bytes just stop.

While blackholed the proxy stops reading, so what the client sends waits in
socket buffers and no answer comes back; restore() lets the buffered bytes flow
again, as TCP retransmission would after a partition heals. It counts what it
relays, per connection, so a cut can prove it carried the lock's connection and
relayed nothing while it was down. Pumps wait with poll(), never select(), which
breaks past 1024 descriptors.
"""

from __future__ import annotations

import select
import socket
import threading
from dataclasses import dataclass
from contextlib import contextmanager
from typing import Iterator, Self, Sequence

from lab.errors import ServiceError

_TICK = 0.1  # how often a waiting pump looks at the stop and flow flags


@dataclass
class Relayed:
    """One relayed connection: the ports that identify it on each side, and the bytes each way."""

    client_port: int  # the client's own port (what the client sees as its local address)
    upstream_port: int  # the proxy's port towards the server (what the server sees as the client)
    to_server: int = 0
    to_client: int = 0

    @property
    def total(self) -> int:
        return self.to_server + self.to_client


class BlackholeProxy:
    """127.0.0.1:port -> target; blackhole() and restore() act on every connection at once."""

    def __init__(self, target_host: str | None, target_port: int):
        self.target = (target_host, target_port)  # host None: this machine, as getaddrinfo reads no host
        self._port: int | None = None
        self.connections: list[Relayed] = []
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._gate = threading.Lock()  # a pump holds it from its flow check to its count
        self._listener: socket.socket | None = None

    def start(self) -> Self:
        self._listener = listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(_TICK)
        self._port = listener.getsockname()[1]
        threading.Thread(target=self._accept, args=(listener,), name="proxy-accept", daemon=True).start()
        return self

    @property
    def port(self) -> int:
        """The proxy's own port, known once started: the kernel picks it, so no other bind can race us."""
        if self._port is None:
            raise RuntimeError("the proxy has no port before start()")
        return self._port

    def relayed_bytes(self) -> int:
        """Bytes relayed so far, both ways, over every connection."""
        with self._lock:
            return sum(c.total for c in self.connections)

    def open_connections(self) -> Sequence[Relayed]:  # a copy; a subclass may narrow the record type
        with self._lock:
            return list(self.connections)

    def blackhole(self) -> None:
        # Under the gate: once this returns, no pump is between its check and its send, so every
        # byte counted afterwards was relayed during the cut.
        with self._gate:
            self._flowing.clear()

    def restore(self) -> None:
        self._flowing.set()

    @property
    def blackholed(self) -> bool:
        return not self._flowing.is_set()

    def _accept(self, listener: socket.socket) -> None:
        while not self._closed.is_set():
            try:
                client, (_, client_port) = listener.accept()
                target = self._upstream()
                if target is None:  # nowhere to send it (a router with no healthy server): refused
                    client.close()
                    continue
                upstream = self._connect_upstream(target)
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                if self._closed.is_set():
                    return
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            record = self._record(client_port, upstream.getsockname()[1])
            with self._lock:
                self._sockets += [client, upstream]
                self.connections.append(record)
            for src, dst, way in ((client, upstream, "to_server"), (upstream, client, "to_client")):
                threading.Thread(target=self._pump, args=(src, dst, record, way), name="proxy-pump",
                                 daemon=True).start()

    def _upstream(self) -> tuple[str | None, int] | None:
        """Where a new connection goes (a subclass may choose per connection; None refuses it)."""
        return self.target

    def _connect_upstream(self, target: tuple[str | None, int]) -> socket.socket:
        """A new connection to target, for one client (a subclass may open it elsewhere: in a namespace)."""
        return socket.create_connection(target, timeout=5)

    def _record(self, client_port: int, upstream_port: int) -> Relayed:
        """What the proxy keeps about a new connection (a subclass may learn more about it)."""
        return Relayed(client_port, upstream_port)

    def _passes(self, record: Relayed) -> bool:
        """Whether this connection's bytes flow now (a subclass may cut some connections and not others)."""
        return self._flowing.is_set()

    def _wait_to_pass(self, record: Relayed) -> bool:
        """Wait at most a tick for the connection to flow; whether it does."""
        return self._flowing.wait(_TICK)

    def _pump_ended(self, record: Relayed) -> None:
        """One direction of a connection stopped relaying (a subclass may note it)."""

    def _pump(self, src: socket.socket, dst: socket.socket, record: Relayed, way: str) -> None:
        try:
            readable = select.poll()
            readable.register(src, select.POLLIN)  # ValueError: stop() closed the socket before we got here
            while not self._closed.is_set():
                if not self._wait_to_pass(record):
                    continue  # cut: leave the bytes where they are, as a dropped link does
                if not readable.poll(_TICK * 1000):
                    continue
                data = src.recv(65536)
                if not data:
                    break
                while True:
                    with self._gate:  # a partition holds every proxy's gate while it changes sides
                        if self._passes(record):
                            dst.sendall(data)
                            with self._lock:
                                setattr(record, way, getattr(record, way) + len(data))
                            break
                    # The cut came while we read: hold these bytes until it heals, as a network would.
                    if self._closed.is_set():
                        return
                    self._wait_to_pass(record)
        except (OSError, ValueError):
            pass
        finally:
            self._pump_ended(record)
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> None:
        """Close the listener and every relayed connection."""
        self._closed.set()
        self._flowing.set()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in [self._listener, *sockets]:
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def started_link(link: BlackholeProxy | None, what: str) -> BlackholeProxy:
    """A link that exists from its owner's start() to its stop(); a ServiceError naming it outside that time."""
    if link is None:
        raise ServiceError(f"{what} is not up (the servers are not started)")
    return link


def hold_back(link: BlackholeProxy) -> int:
    """Blackhole a replication link: from now on the other end receives nothing. Returns the bytes the link had
    carried (0: the other end never streamed through it)."""
    carried = link.relayed_bytes()
    link.blackhole()
    return carried


@contextmanager
def gates_held(proxies: Sequence[BlackholeProxy]) -> Iterator[None]:
    """Every proxy's gate, taken in a fixed order: no pump is between its check and its send while the caller
    changes which links are cut."""
    for proxy in proxies:
        proxy._gate.acquire()
    try:
        yield
    finally:
        for proxy in proxies:
            proxy._gate.release()
