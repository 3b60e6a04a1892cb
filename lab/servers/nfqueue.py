"""Packets held in the kernel for a chosen time: the nfnetlink_queue protocol, spoken over an AF_NETLINK socket.

This kernel has no netem, so nothing in traffic control can delay a packet. iptables' NFQUEUE target can:
it parks each matching packet in the kernel and tells a program listening on a netlink socket, and the
packet goes on only when that program answers with a verdict. This module is that program, in Python's
standard library alone (the PyPI NetfilterQueue package builds from source against libnetfilter-queue-dev,
so a machine without that Debian package could not even pip-install it): it answers ACCEPT for each
packet a fixed time after the packet reached it, in arrival order, and keeps how long it held each one.

The socket belongs to the network namespace of the thread that opens it: start() runs inside the
namespace whose packets it holds (lab/servers/netns.py). Messages and attributes are those of the
kernel's include/uapi/linux/netfilter/nfnetlink_queue.h; numbers on the wire are big-endian.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import statistics
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
MSG_PACKET, MSG_VERDICT, MSG_CONFIG = 0, 1, 2
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLMSG_ERROR = 2
CFG_CMD, CFG_PARAMS, CFG_QUEUE_MAXLEN = 1, 2, 3  # NFQA_CFG_*
CMD_BIND, CMD_UNBIND = 1, 2  # NFQNL_CFG_CMD_*
COPY_META = 1  # the packet's metadata only: the verdict needs its id, nothing of its payload
PACKET_HDR, VERDICT_HDR = 1, 2  # NFQA_PACKET_HDR, NFQA_VERDICT_HDR
NF_ACCEPT = 1
MAX_QUEUED = 65536  # packets the kernel parks per queue before it drops them (counted in queue_dropped)
_HEADER = struct.Struct("=IHHII")  # struct nlmsghdr, in the host's order
_NFGEN = struct.Struct("=BBH")  # struct nfgenmsg: family, version, queue number (big-endian, packed by hand)


class QueueUnavailable(Exception):
    """The kernel would not hand this program a queue (no nfnetlink_queue, or no CAP_NET_ADMIN)."""


def _attribute(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _message(kind: int, queue: int, attributes: Sequence[bytes], flags: int = NLM_F_REQUEST) -> bytes:
    body = _NFGEN.pack(socket.AF_UNSPEC, 0, socket.htons(queue)) + b"".join(attributes)
    return _HEADER.pack(_HEADER.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags, 0, 0) + body


def _attributes(data: bytes) -> dict[int, bytes]:
    found = {}
    while len(data) >= 4:
        length, kind = struct.unpack_from("=HH", data)
        if length < 4:
            break
        found[kind & 0x7FFF] = data[4:length]
        data = data[(length + 3) & ~3:]
    return found


def _messages(data: bytes):
    """(type, payload after the header) of each netlink message in one datagram."""
    while len(data) >= _HEADER.size:
        length, kind = _HEADER.unpack_from(data)[:2]
        if length < _HEADER.size:
            break
        yield kind, data[_HEADER.size:length]
        data = data[(length + 3) & ~3:]


@dataclass
class QueueRecord:
    """What one queue did: packets it held, how long each, and how many the heal let through early."""

    held: int = 0
    holds_s: list[float] = field(default_factory=list)
    released_at_heal: int = 0

    def summary(self) -> dict:
        holds = sorted(self.holds_s)
        return {"packets_held": self.held, "released_at_heal": self.released_at_heal,
                "hold_s": None if not holds else {"min": round(holds[0], 4), "median": round(statistics.median(holds), 4),
                                                  "max": round(holds[-1], 4)}}


class DelayQueue:
    """Every packet sent to these queue numbers held delay_s, then accepted, in the order it came."""

    def __init__(self, queues: Sequence[int], delay_s: float):
        self.queues = list(queues)
        self.delay_s = delay_s
        self.records = {q: QueueRecord() for q in self.queues}
        self.error: str | None = None  # why the holding thread stopped early; packets were then dropped, not held
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = -1, -1
        self._stop = threading.Event()
        self._held: deque = deque()  # (due, queue, packet id, arrived), in arrival order: due times rise with it

    def start(self) -> None:
        """Bind the queues, on the calling thread's network namespace, and start holding; QueueUnavailable if the
        kernel refuses."""
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        except OSError as exc:
            raise QueueUnavailable(f"no netfilter netlink socket: {exc.strerror}") from None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            sock.bind((0, 0))
            for queue in self.queues:
                self._request(sock, _message(MSG_CONFIG, queue, [_attribute(CFG_CMD, struct.pack(
                    "=BBH", CMD_BIND, 0, socket.htons(socket.AF_INET)))], NLM_F_REQUEST | NLM_F_ACK))
                self._request(sock, _message(MSG_CONFIG, queue, [
                    _attribute(CFG_PARAMS, struct.pack(">IB", 0, COPY_META)),
                    _attribute(CFG_QUEUE_MAXLEN, struct.pack(">I", MAX_QUEUED))], NLM_F_REQUEST | NLM_F_ACK))
        except OSError as exc:
            sock.close()
            raise QueueUnavailable(f"the kernel refused queue {self.queues}: {exc.strerror or exc}") from None
        self._sock = sock
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._hold, name="locklab-nfqueue", daemon=True)
        self._thread.start()

    @staticmethod
    def _request(sock: socket.socket, message: bytes) -> None:
        """Send one configuration message and read the kernel's acknowledgement; OSError on its refusal."""
        sock.send(message)
        for kind, payload in _messages(sock.recv(65536)):
            if kind == NLMSG_ERROR:
                code = struct.unpack_from("=i", payload)[0]
                if code:
                    raise OSError(-code, os.strerror(-code))

    def _hold(self) -> None:
        sock = self._sock
        assert sock is not None  # start() set it before starting this thread
        try:
            while not self._stop.is_set():
                wait = max(0.0, self._held[0][0] - time.monotonic()) if self._held else None
                readable, _, _ = select.select([sock.fileno(), self._wake_r], [], [], wait)
                if sock.fileno() in readable:
                    self._receive(sock)
                self._let_through(time.monotonic())
            self._receive(sock)  # what the kernel parked before the rules went away: let through now
            self._let_through(None)
        except OSError as exc:  # ENOBUFS: packets the kernel parked that this thread will never see
            self.error = f"{errno.errorcode.get(exc.errno or 0, exc.errno)}: {exc.strerror}"

    def _receive(self, sock: socket.socket) -> None:
        while True:
            try:
                data = sock.recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            arrived = time.monotonic()
            for kind, payload in _messages(data):
                if kind != (NFNL_SUBSYS_QUEUE << 8) | MSG_PACKET:
                    continue
                queue = socket.ntohs(_NFGEN.unpack_from(payload)[2])
                header = _attributes(payload[_NFGEN.size:]).get(PACKET_HDR)
                if header is None or queue not in self.records:
                    continue
                packet_id = struct.unpack_from(">I", header)[0]
                self._held.append((arrived + self.delay_s, queue, packet_id, arrived))
                self.records[queue].held += 1

    def _let_through(self, now: float | None) -> None:
        """Accept every packet due by now (None: every packet, now: the heal)."""
        sock = self._sock
        assert sock is not None
        while self._held and (now is None or self._held[0][0] <= now):
            _, queue, packet_id, arrived = self._held.popleft()
            sock.send(_message(MSG_VERDICT, queue, [_attribute(VERDICT_HDR, struct.pack(">II", NF_ACCEPT, packet_id))]))
            record = self.records[queue]
            if now is None:
                record.released_at_heal += 1
            else:
                record.holds_s.append(time.monotonic() - arrived)

    def kernel_counts(self) -> dict[int, dict]:
        """The kernel's own view of each queue (/proc/net/netfilter/nfnetlink_queue, read in this thread's
        namespace): packets waiting, and those it dropped because the queue was full or this program was slow."""
        path = Path("/proc/thread-self/net/netfilter/nfnetlink_queue")
        found: dict[int, dict] = {}
        try:
            lines = path.read_text().splitlines()
        except OSError:
            return found
        for line in lines:
            fields = line.split()
            if len(fields) >= 7 and int(fields[0]) in self.records:
                found[int(fields[0])] = {"waiting": int(fields[2]), "queue_dropped": int(fields[5]),
                                         "user_dropped": int(fields[6])}
        return found

    def release(self) -> None:
        """Let every held packet through now and give the queues back (idempotent). Call it once the rules that
        feed the queues are gone: a packet parked after the last read would be dropped when the socket closes."""
        if self._thread is not None:
            self._stop.set()
            os.write(self._wake_w, b"x")
            self._thread.join(10)
            self._thread = None
        if self._sock is not None:
            for queue in self.queues:
                try:
                    self._sock.send(_message(MSG_CONFIG, queue, [_attribute(CFG_CMD, struct.pack(
                        "=BBH", CMD_UNBIND, 0, socket.htons(socket.AF_INET)))]))
                except OSError:
                    pass
            self._sock.close()
            self._sock = None
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)
