"""The cut proxy past 1024 open descriptors: select() fails there ("filedescriptor out of range"), poll() does not."""

from __future__ import annotations

import gc
import os
import resource
import socket
import time

import pytest

from lab.servers.proxy import BlackholeProxy

pytestmark = pytest.mark.server


def _fill_below_1025(padding: list[int]) -> None:
    """Open descriptors until one is numbered past 1024: every free number below is then taken."""
    while True:
        padding.append(os.open(os.devnull, os.O_RDONLY))
        if padding[-1] > 1024:
            return


def _resp(sock: socket.socket, *words: str) -> bytes:
    sock.sendall(f"*{len(words)}\r\n".encode() + b"".join(f"${len(w)}\r\n{w}\r\n".encode() for w in words))
    return sock.recv(1024)


def test_the_proxy_relays_and_cuts_with_descriptors_numbered_past_1024(services):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1300:
        pytest.skip(f"the hard limit on open files is {hard}; this test needs 1300")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1300), hard))
    padding: list[int] = []
    gc.collect()
    gc.disable()  # a collected socket would free a low number for the next descriptor
    try:
        _fill_below_1025(padding)  # every new descriptor is now > 1024
        assert min(padding) < 1024 < max(padding)
        host, port = services.addresses("redis")[0]
        password = services.redis_url.split(":")[2].split("@")[0]
        with BlackholeProxy(host, port) as proxy:
            _fill_below_1025(padding)  # again: stop 38's run saw descriptor 38 freed meanwhile by another thread
            client = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
            assert client.fileno() > 1024
            assert _resp(client, "AUTH", password) == b"+OK\r\n"
            assert _resp(client, "PING") == b"+PONG\r\n"
            [relayed] = proxy.open_connections()
            answered = len(b"+OK\r\n+PONG\r\n")
            deadline = time.monotonic() + 5
            while relayed.to_client < answered and time.monotonic() < deadline:
                time.sleep(0.01)  # the pump counts right after its send, which the client may see first
            assert relayed.to_server > 0 and relayed.to_client == answered
            proxy.blackhole()
            client.sendall(b"*1\r\n$4\r\nPING\r\n")
            client.settimeout(0.5)
            with pytest.raises(TimeoutError):
                client.recv(1024)  # cut: the bytes wait, no answer comes
            assert relayed.to_client == answered
            proxy.restore()
            client.settimeout(5)
            assert client.recv(1024) == b"+PONG\r\n"  # healed: the buffered PING went through
            client.close()
    finally:
        gc.enable()
        for fd in padding:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
