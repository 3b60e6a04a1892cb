"""A ZooKeeper's version and whether it is an ensemble, reading only, by the four-letter command `srvr` (the one
ZooKeeper allows by default): its mode says standalone, or leader / follower of an ensemble."""

from __future__ import annotations

import socket

from lab.errors import LabError, ServiceError
from lab.stack.description import Unknown, ZooKeeper

TIMEOUT_S = 5.0


def _srvr(host: str, port: int) -> dict[str, str]:
    try:
        with socket.create_connection((host, port), timeout=TIMEOUT_S) as sock:
            sock.sendall(b"srvr")
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError as exc:
        raise ServiceError(f"ZooKeeper at {host}:{port} is unreachable: {exc.strerror or exc}") from None
    text = b"".join(chunks).decode(errors="replace")
    if "not in the whitelist" in text or "not executed" in text:
        raise ServiceError(f"ZooKeeper at {host}:{port} refuses the srvr command (4lw.commands.whitelist)")
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines()) if v}


def read_zookeeper(hosts: str) -> ZooKeeper:
    """hosts: host:port[,host:port...], as a client's connection string gives them; the first that answers is read."""
    found, why = None, "no server answered"
    for item in hosts.split(","):
        host, colon, port = item.strip().rpartition(":")
        if not colon or not host or not port.isdigit():
            raise LabError(f"--zk-hosts takes host:port[,host:port...], not {hosts!r}")
        try:
            found = _srvr(host, int(port))
            break
        except ServiceError as exc:
            why = str(exc)
    if found is None:
        raise ServiceError(why)
    mode = found.get("Mode")
    version = found.get("Zookeeper version", "").split(",")[0].split("-")[0]
    if mode == "standalone":
        return ZooKeeper(version or Unknown("srvr named no version"), False, 1)
    if mode in ("leader", "follower", "observer"):
        return ZooKeeper(version or Unknown("srvr named no version"), True,
                         Unknown("an ensemble; srvr does not say how many servers it has"))
    unknown = Unknown(f"srvr gave mode {mode!r}")
    return ZooKeeper(version or Unknown("srvr named no version"), unknown, unknown)
