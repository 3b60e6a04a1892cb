"""Holders forked from one process that imported once (lab/holder/zygote.py), while a run is open.

A fresh holder spends about half a CPU-second on its imports; a forked one shares them. The lab talks to the
fork server over a Unix socket, and each holder it gets back wears Popen's face (ForkedHolder): its pid, its
three pipes, poll(), wait(), send_signal(), kill(). The server, not the lab, is the holder's parent and reaps
it; it reports each exit, and the handle learns its return code from that report. A run opens the server and
closes it (lab/runner/run.py); with none open, or one that cannot fork, every holder starts fresh, as before.

A holder in the lab's own environment is forked, in the lab's network or in a trial's network namespace (the child
enters it first, as a fresh holder's preexec would); one under a fake clock is started for its trial, since
libfaketime must be preloaded when its process starts.
"""

from __future__ import annotations

import array
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from typing import Sequence

from lab.servers.processes import popen

FORK_TIMEOUT_S = 30.0  # the server's imports come first (about a second) and a saturated machine slows them


class ForkServerError(RuntimeError):
    """The fork server could not give a holder (it ended, refused, or did not answer)."""


class ForkedHolder:
    """A holder the fork server started, with the parts of subprocess.Popen the lab uses."""

    def __init__(self, pid: int, stdin, stdout, stderr):
        self.pid, self.stdin, self.stdout, self.stderr = pid, stdin, stdout, stderr
        self.args = ["lab.holder.process", "(forked)"]
        self.returncode: int | None = None
        self._ended = threading.Event()

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        # Once the server has reported the exit the pid is no longer this holder's; until then it is (the
        # kernel hands out pids in turn, so one reaped a moment ago is not reused before its report arrives).
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ForkServer:
    """The lab's end of one fork server: fork() gives a running holder waiting for its spec."""

    def __init__(self, preload: Sequence[str] = ()):
        """preload: the backends ("module:Class") whose modules the server imports before its first fork."""
        self._socket, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = popen([sys.executable, "-m", "lab.holder.zygote", str(theirs.fileno()), *preload],
                              pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
        finally:
            theirs.close()
        self._lock = threading.Lock()              # one fork request at a time: answers come in order
        self._answers: queue.Queue = queue.Queue()
        self._children: dict[int, ForkedHolder] = {}
        self._early_exits: dict[int, int] = {}     # an exit read before its handle was registered
        self._state = threading.Lock()
        self._ended = False
        self.forked = 0
        threading.Thread(target=self._read, name="holder-fork-server", daemon=True).start()

    def _read(self) -> None:
        try:
            while message := self._socket.recv(256):
                word, _, rest = message.decode().partition(" ")
                if word == "exited":
                    pid, code = (int(part) for part in rest.split())
                    with self._state:
                        child = self._children.pop(pid, None)
                        if child is None:
                            self._early_exits[pid] = code
                    if child is not None:
                        child._exited(code)
                else:
                    self._answers.put((word, rest))
        except OSError:
            pass
        with self._state:
            self._ended = True
            orphans, self._children = list(self._children.values()), {}
        for child in orphans:  # the server is gone, and its children died with it (their parent-death signal)
            child._exited(-signal.SIGKILL)
        self._answers.put(("ended", "the holder fork server ended"))

    def fork(self, netns: int | None = None) -> ForkedHolder:
        """A new holder process, in the network namespace `netns` names when given (lab/servers/netns.py: the
        child enters it before anything else); ForkServerError if the server cannot give one."""
        with self._lock:
            if self._ended:
                raise ForkServerError("the holder fork server ended")
            ends = [os.pipe() for _ in range(3)]
            theirs = [ends[0][0], ends[1][1], ends[2][1]]  # the child reads stdin, writes stdout and stderr
            request, sent = (b"fork", theirs) if netns is None else (b"fork-netns", [*theirs, netns])
            try:
                self._socket.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", sent))])
            except OSError as exc:
                raise ForkServerError(f"the holder fork server is gone: {exc}") from None
            finally:
                for fd in theirs:
                    os.close(fd)
            stdin = open(ends[0][1], "w")
            stdout, stderr = open(ends[1][0], "r"), open(ends[2][0], "r")
            try:
                word, rest = self._answers.get(timeout=FORK_TIMEOUT_S)
            except queue.Empty:
                word, rest = "silent", f"no answer within {FORK_TIMEOUT_S:g} s"
            if word != "forked":
                for stream in (stdin, stdout, stderr):
                    stream.close()
                raise ForkServerError(f"the holder fork server did not fork: {rest}")
            child = ForkedHolder(int(rest), stdin, stdout, stderr)
            with self._state:
                self._children[child.pid] = child
                code = self._early_exits.pop(child.pid, None)
            if code is not None:
                child._exited(code)
            self.forked += 1
            return child

    def close(self) -> None:
        """End the server, and with it every holder it forked that still runs."""
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._socket.close()
        if self.proc.poll() is None:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


_lock = threading.Lock()
_server: ForkServer | None = None
_broken: str | None = None


def open_server(preload: Sequence[str] = ()) -> None:
    """Let holders started from now on be forked (a run's start); preload as ForkServer's."""
    global _server, _broken
    with _lock:
        if _server is None:
            _server, _broken = ForkServer(preload), None


def close_server() -> None:
    """No more forks: the server ends, with any holder of its still running (a run's end, whatever ended it)."""
    global _server
    with _lock:
        server, _server = _server, None
    if server is not None:
        server.close()


def fork(netns: int | None = None) -> ForkedHolder | None:
    """A forked holder (in the network namespace `netns` names, when given) when a server is open and works, else
    None (the caller starts one fresh). Once the server
    failed to give one it is not asked again: a silent server would cost every later holder FORK_TIMEOUT_S, and
    its late answer would be read as the next request's."""
    global _broken
    with _lock:
        server = _server
    if server is None or _broken is not None:
        return None
    try:
        return server.fork(netns)
    except ForkServerError as exc:
        if _broken is None:
            _broken = str(exc)
            print(f"locklab: holders start fresh from now on: {exc}", file=sys.stderr)
        return None
