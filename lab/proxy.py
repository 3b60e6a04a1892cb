"""A loopback TCP proxy that can cut a connection the way a network does: no RST, bytes just stop.

While blackholed the proxy stops reading, so what the client sends waits in
socket buffers and no answer comes back; restore() lets the buffered bytes flow
again, as TCP retransmission would after a partition heals.
"""

from __future__ import annotations

import select
import socket
import threading


class BlackholeProxy:
    """127.0.0.1:port -> target; blackhole() and restore() act on every connection at once."""

    def __init__(self, target_host: str, target_port: int):
        self.target = (target_host, target_port)
        self.port: int | None = None  # known once started: the kernel picks it, so no other bind can race us
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None

    def start(self) -> "BlackholeProxy":
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()
        return self

    def blackhole(self) -> None:
        self._flowing.clear()

    def restore(self) -> None:
        self._flowing.set()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                ready, _, _ = select.select([self._listener], [], [], 0.1)
                if not ready:
                    continue
                client, _ = self._listener.accept()
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), name="proxy-pump", daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self._closed.is_set():
                if not self._flowing.wait(0.1):
                    continue  # blackholed: leave the bytes where they are
                ready, _, _ = select.select([src], [], [], 0.1)
                if not ready:
                    continue
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
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

    def __enter__(self) -> "BlackholeProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
