"""Packets held in the kernel for a chosen time: the nfnetlink_queue protocol, spoken over an AF_NETLINK socket.

This kernel has no netem, so nothing in traffic control can delay a packet. iptables' NFQUEUE target can:
it parks each matching packet in the kernel and tells a program listening on a netlink socket, and the
packet goes on only when that program answers with a verdict. This module is that program, in Python's
standard library alone (the PyPI NetfilterQueue package builds from source against libnetfilter-queue-dev,
so a machine without that Debian package could not even pip-install it): it answers ACCEPT for each
packet a fixed time after the kernel stamped its arrival, in arrival order, and keeps how long it held each.

It runs as a process of its own inside the namespace whose packets it holds (started with
`python -m lab.servers.nfqueue`, dying with the lab), one thread, niced up: a busy lab process, whose
threads share one interpreter lock, would answer late. The same process echoes a UDP probe and times
it, so that the delay is measured where it is made. The parent talks
to it in JSON lines (DelayQueue). Messages and attributes are those of the kernel's
include/uapi/linux/netfilter/nfnetlink_queue.h; numbers on the wire are big-endian.
"""

from __future__ import annotations

import errno
import json
import os
import select
import socket
import statistics
import struct
import subprocess
import sys
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
COPY_META = 1  # the packet's metadata only: the verdict needs its id and arrival, nothing of its payload
PACKET_HDR, VERDICT_HDR, TIMESTAMP = 1, 2, 4  # NFQA_PACKET_HDR, NFQA_VERDICT_HDR, NFQA_TIMESTAMP
NF_ACCEPT = 1
MAX_QUEUED = 65536  # packets the kernel parks per queue before it drops them (counted in queue_dropped)
SO_TIMESTAMPNS = 35  # Linux's value (Python 3.11's socket module does not name it)
NICE = -10  # what the holding process asks of the scheduler: answer on time on a shared machine
_HEADER = struct.Struct("=IHHII")  # struct nlmsghdr, in the host's order
_NFGEN = struct.Struct("=BBH")  # struct nfgenmsg: family, version, queue number (big-endian, packed by hand)


def arrival(wall_stamp: float | None, read_wall: float, read_mono: float) -> tuple[float, bool]:
    """A packet's arrival on the monotonic clock, and whether the kernel's stamp gave it (else: the read).

    The kernel stamps on the wall clock, which the host may step (28 s seen on this machine kind): the stamp
    counts only as an age at the read, so every hold after it runs on the monotonic clock. A stamp on another
    clock (a sender's departure time) is far off the read: then the read counts."""
    if wall_stamp is None or not read_wall - 5.0 <= wall_stamp <= read_wall + 0.001:
        return read_mono, False
    return read_mono - max(0.0, read_wall - wall_stamp), True


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


def _bind_message(queue: int, command: int) -> bytes:
    payload = struct.pack("=BBH", command, 0, socket.htons(socket.AF_INET))
    return _message(MSG_CONFIG, queue, [_attribute(CFG_CMD, payload)], NLM_F_REQUEST | NLM_F_ACK)


@dataclass
class QueueRecord:
    """What one queue did: packets it held, how long each, and how many the heal let through early."""

    held: int = 0
    holds_s: list[float] = field(default_factory=list)
    released_at_heal: int = 0
    stamped: int = 0  # packets whose hold ran from the kernel's arrival stamp (the rest: from this program's read)

    def summary(self) -> dict:
        holds = sorted(self.holds_s)
        return {"packets_held": self.held, "released_at_heal": self.released_at_heal,
                "held_from_kernel_stamp": self.stamped,
                "hold_s": None if not holds else {"min": round(holds[0], 4),
                                                  "median": round(statistics.median(holds), 4),
                                                  "max": round(holds[-1], 4)}}


class _Probe:
    """The UDP echo inside the namespace and the probe that times round trips through it: the delay measured where
    it is made."""

    def __init__(self):
        # The echo's socket also turns the kernel's receive stamps on, which the queued packets then carry.
        self.echo = _udp()
        self.client = _udp()
        self.running: dict | None = None

    @property
    def port(self) -> int:
        return self.echo.getsockname()[1]

    def due(self) -> float | None:
        """When the probe next has something to do (send, or give up waiting), or None while none runs."""
        if self.running is None:
            return None
        sending = self.running["next"] < self.running["count"]
        return self.running["next_send"] if sending else self.running["deadline"]

    def answer_echoes(self) -> None:
        while True:
            try:
                data, peer = self.echo.recvfrom(64)
            except BlockingIOError:
                return
            self.echo.sendto(data, peer)

    def start(self, count: int, spacing_s: float, within_s: float) -> None:
        now = time.monotonic()
        self.running = {"count": count, "spacing": spacing_s, "next": 0, "next_send": now, "sent": {}, "back": {},
                        "deadline": now + (count - 1) * spacing_s + within_s}
        self.step()

    def step(self) -> None:
        probe = self.running
        if probe is None:
            return
        while probe["next"] < probe["count"] and probe["next_send"] <= time.monotonic():
            n = probe["next"]
            probe["sent"][n] = time.monotonic()
            self.client.sendto(n.to_bytes(4, "big"), ("127.0.0.1", self.port))
            probe["next"] += 1
            probe["next_send"] += probe["spacing"]
        if len(probe["back"]) == probe["count"] or time.monotonic() >= probe["deadline"]:
            say({"round_trips": [round(probe["back"][n] - probe["sent"][n], 5) if n in probe["back"] else None
                                 for n in range(probe["count"])]})
            self.running = None

    def read_back(self) -> None:
        # Read, not the kernel's receive stamp: that is taken as the packet comes in, before the queue holds it.
        while True:
            try:
                data = self.client.recv(64)
            except BlockingIOError:
                return
            n = int.from_bytes(data[:4], "big")
            if self.running is not None and n in self.running["sent"] and n not in self.running["back"]:
                self.running["back"][n] = time.monotonic()


def _udp() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock


def kernel_counts(records: dict) -> dict[int, dict]:
    """The kernel's own view of each queue (/proc/net/netfilter/nfnetlink_queue, this namespace's): packets
    waiting, and those it dropped because the queue was full or this program was slow to read."""
    found: dict[int, dict] = {}
    try:
        lines = Path("/proc/self/net/netfilter/nfnetlink_queue").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        if len(fields) >= 7 and int(fields[0]) in records:
            found[int(fields[0])] = {"waiting": int(fields[2]), "queue_dropped": int(fields[5]),
                                     "user_dropped": int(fields[6])}
    return found


class _Holder:
    """The process's one loop: packets held and let through, the probe echoed and timed, the parent's requests."""

    def __init__(self, queues: list[int], delay_s: float):
        self.queues, self.delay_s = queues, delay_s
        self.records = {q: QueueRecord() for q in queues}
        self.held: deque = deque()  # (due, queue, packet id, arrived, stamped), due times rising with arrival
        self.error: str | None = None
        self.nl: socket.socket | None = None
        if queues:
            self.nl = self._bind(queues)
        self.probe = _Probe()

    @staticmethod
    def _bind(queues: list[int]) -> socket.socket:
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        except OSError as exc:
            raise QueueUnavailable(f"no netfilter netlink socket: {exc.strerror}") from None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            sock.bind((0, 0))
            for queue in queues:
                _request(sock, _bind_message(queue, CMD_BIND))
                _request(sock, _message(MSG_CONFIG, queue, [
                    _attribute(CFG_PARAMS, struct.pack(">IB", 0, COPY_META)),
                    _attribute(CFG_QUEUE_MAXLEN, struct.pack(">I", MAX_QUEUED))], NLM_F_REQUEST | NLM_F_ACK))
        except OSError as exc:
            sock.close()
            raise QueueUnavailable(f"the kernel refused queue {queues}: {exc.strerror or exc}") from None
        sock.setblocking(False)
        return sock

    def serve(self, requests) -> None:
        """Until the parent asks for the release (or goes): hold, echo, probe, answer."""
        say({"ready": True, "echo_port": self.probe.port})
        pending = b""
        while True:
            watched = [s for s in (self.nl, self.probe.echo, self.probe.client) if s is not None] + [requests]
            readable, _, _ = select.select(watched, [], [], self._wait())
            if self.nl is not None and self.nl in readable:
                self._receive()
            if self.probe.echo in readable:
                self.probe.answer_echoes()
            if self.probe.client in readable:
                self.probe.read_back()
            self._let_through(time.monotonic())
            self.probe.step()
            if requests in readable:
                chunk = os.read(requests, 4096)
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    request = json.loads(line)
                    if "probe" in request:
                        self.probe.start(**request["probe"])
                    elif "hold_s" in request:  # from the next packet on
                        self.delay_s = float(request["hold_s"])
                        say({"holding_s": self.delay_s})
                    elif "release" in request:
                        return self._release()
                if not chunk:  # the parent is gone: let everything through and leave
                    return self._release()

    def _wait(self) -> float | None:
        times = [self.held[0][0]] if self.held else []
        if (due := self.probe.due()) is not None:
            times.append(due)
        return None if not times else max(0.0, min(times) - time.monotonic())

    def _receive(self) -> None:
        assert self.nl is not None
        while True:
            try:
                data = self.nl.recv(65536)
            except BlockingIOError:
                return
            except OSError as exc:  # ENOBUFS: packets the kernel parked that this program will never see
                self.error = f"{errno.errorcode.get(exc.errno or 0, exc.errno)}: {exc.strerror}"
                return
            read_at, read_mono = time.time(), time.monotonic()
            for kind, payload in _messages(data):
                if kind != (NFNL_SUBSYS_QUEUE << 8) | MSG_PACKET:
                    continue
                queue = socket.ntohs(_NFGEN.unpack_from(payload)[2])
                attributes = _attributes(payload[_NFGEN.size:])
                header = attributes.get(PACKET_HDR)
                if header is None or queue not in self.records:
                    continue
                stamp = attributes.get(TIMESTAMP)
                wall_stamp = None
                if stamp is not None and len(stamp) >= 16:
                    sec, usec = struct.unpack_from(">QQ", stamp)
                    wall_stamp = sec + usec / 1e6
                arrived, stamped = arrival(wall_stamp, read_at, read_mono)
                packet_id = struct.unpack_from(">I", header)[0]
                self.held.append((arrived + self.delay_s, queue, packet_id, arrived, stamped))
                self.records[queue].held += 1

    def _let_through(self, now: float | None) -> None:
        """Accept every packet due by now (None: every packet, now: the heal)."""
        while self.held and (now is None or self.held[0][0] <= now):
            _, queue, packet_id, arrived, stamped = self.held.popleft()
            assert self.nl is not None
            verdict = _attribute(VERDICT_HDR, struct.pack(">II", NF_ACCEPT, packet_id))
            self.nl.send(_message(MSG_VERDICT, queue, [verdict]))
            record = self.records[queue]
            if now is None:
                record.released_at_heal += 1
            else:
                record.holds_s.append(time.monotonic() - arrived)
                record.stamped += stamped

    def _release(self) -> None:
        """Everything parked let through now (the rules that fed the queues are gone by then), the queues given back,
        and the report."""
        if self.nl is not None:
            self._receive()
            self._let_through(None)
        kernel = kernel_counts(self.records)
        if self.nl is not None:
            for queue in self.queues:
                try:
                    _request(self.nl, _bind_message(queue, CMD_UNBIND))
                except OSError:
                    pass
            self.nl.close()
        say({"records": {q: r.summary() for q, r in self.records.items()}, "kernel": kernel, "error": self.error})


def _request(sock: socket.socket, message: bytes) -> None:
    """Send one configuration message and read the kernel's acknowledgement; OSError on its refusal."""
    sock.send(message)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            select.select([sock], [], [], 0.1)
            continue
        for kind, payload in _messages(data):
            if kind == NLMSG_ERROR:
                code = struct.unpack_from("=i", payload)[0]
                if code:
                    raise OSError(-code, os.strerror(-code))
                return
    raise OSError(errno.ETIMEDOUT, "the kernel did not acknowledge")


def say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    """The holding process: its configuration is the first line of stdin."""
    try:
        os.nice(NICE)
    except OSError:
        pass  # not root: it holds all the same, only less punctually on a busy machine
    config = json.loads(sys.stdin.buffer.readline())
    try:
        holder = _Holder(config["queues"], config["delay_s"])
    except QueueUnavailable as exc:
        say({"error": str(exc)})
        return
    holder.serve(sys.stdin.fileno())


class DelayQueue:
    """The parent's handle on a holding process in a namespace: packets sent to these queue numbers held delay_s from
    their arrival, then accepted in the order they came; a UDP echo in there, and its round trips."""

    def __init__(self, queues: Sequence[int], delay_s: float = 0.0):
        self.queues = list(queues)
        self.delay_s = delay_s
        self.echo_port: int | None = None
        self.report: dict | None = None  # what the process said at its release: records, kernel counts, error
        self._proc: subprocess.Popen | None = None

    def start(self, netns: int) -> None:
        """Start the process inside the namespace and bind its queues; QueueUnavailable if the kernel refuses."""
        from lab.servers.processes import popen

        self._proc = popen([sys.executable, "-m", "lab.servers.nfqueue"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, netns=netns)
        self._send({"queues": self.queues, "delay_s": self.delay_s})
        answer = self._answer(30)
        if "error" in answer:
            self.release()
            raise QueueUnavailable(answer["error"])
        self.echo_port = answer["echo_port"]

    def _send(self, message: dict) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(message).encode() + b"\n")
        self._proc.stdin.flush()

    def _answer(self, within_s: float) -> dict:
        from lab.servers.readable import readable  # the parent's side: the queue process keeps to the stdlib

        assert self._proc is not None and self._proc.stdout is not None
        line = self._proc.stdout.readline() if readable(self._proc.stdout, within_s) else b""
        if not line:
            raise QueueUnavailable(f"the holding process said nothing within {within_s:g} s: {self._stderr()}")
        return json.loads(line)

    def _stderr(self) -> str:
        if self._proc is None or self._proc.poll() is None or self._proc.stderr is None:
            return "(still running)"
        lines = [ln for ln in self._proc.stderr.read().decode(errors="replace").splitlines() if ln.strip()]
        return lines[-1] if lines else f"exit code {self._proc.returncode}"

    def hold(self, seconds: float) -> None:
        """From the next packet on, hold each that long (the process answers once it will)."""
        self._send({"hold_s": seconds})
        self._answer(10)
        self.delay_s = seconds

    def round_trips(self, count: int, spacing_s: float, within_s: float) -> list[float | None]:
        """The process sends count datagrams to its echo spacing_s apart: each one's round trip, or None if it never
        came back within_s after the last."""
        self._send({"probe": {"count": count, "spacing_s": spacing_s, "within_s": within_s}})
        return self._answer(count * spacing_s + within_s + 10)["round_trips"]

    def record(self, queue: int) -> dict:
        """What the process reported for one queue at its release (release() first)."""
        records = (self.report or {}).get("records", {})
        return records.get(str(queue), QueueRecord().summary())

    def release(self) -> dict:
        """Let every held packet through now and end the process (idempotent): its report. Call it once the rules
        that feed the queues are gone: a packet parked after the last read would be dropped with the queue."""
        from lab.servers.readable import readable  # the parent's side: the queue process keeps to the stdlib
        from lab.servers.processes import kill_and_close

        if self._proc is None:
            return self.report or {}
        proc, self._proc = self._proc, None
        try:
            if proc.poll() is None:
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(b'{"release": true}\n')
                proc.stdin.flush()
                line = proc.stdout.readline() if readable(proc.stdout, 10) else b""
                self.report = json.loads(line) if line else {"error": "the holding process did not report"}
                proc.wait(10)
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            self.report = {"error": f"the holding process failed at its release: {exc}"}
        finally:
            kill_and_close(proc)
        return self.report or {}


if __name__ == "__main__":
    main()
