"""The holder fork server: one process that does a holder's imports once and forks each trial's holder from them.

Why: a holder started fresh spends about half a CPU-second importing SQLAlchemy and the lab before it can
acquire, and in a run's first phase, where two cores are saturated, hundreds of holders paid it (about 120
CPU-seconds of pause, cut and failover together). A fork shares those imports and costs a few milliseconds.

The lab (lab/holder/forks.py) sends `fork` on a Unix socket with three pipe ends (SCM_RIGHTS), or `fork-netns`
with a network namespace's descriptor after them; this server forks, and the child enters that namespace when
given, makes the pipes its stdin, stdout and stderr, takes a process group of its own, asks to
die with this server (which dies with the lab) and runs lab.holder.process.main(), as a fresh holder would. The
server answers `forked PID`, and `exited PID CODE` when it reaps the child (CODE as Popen's returncode:
negative for a signal). It stops when the lab closes the socket; its children then die with it.

Usage: python -m lab.holder.zygote FD [MODULE:CLASS ...]
(FD: this end of the lab's socket, passed open; then the backends whose modules to import first)
"""

from __future__ import annotations

import array
import importlib
import os
import select
import signal
import socket
import sys
import threading
import traceback

# What every holder imports before it can acquire (lab/holder/process.py's main), imported once here. No
# library that starts threads or holds connections at import (gRPC, used by etcd3) may be imported before a fork.
import psycopg2  # noqa: F401
import sqlalchemy  # noqa: F401

from lab.errors import LockLost  # noqa: F401
from lab.holder import process
from lab.declarations.registry import import_entry  # noqa: F401
from lab.servers.clients import pg_engine  # noqa: F401
from lab.servers.postgres import sql as pg  # noqa: F401
from lab.servers.processes import die_with_parent, enter_netns
from lab.servers.services import Services  # noqa: F401
from lab.workload.contract import BackendContext, describe_error  # noqa: F401
from lab.workload.table import CompanyTable  # noqa: F401

PIPES = 3  # the child's stdin, stdout and stderr, in that order


def _preload(entries: list[str]) -> None:
    """Import the module of each backend the run will hold ("module:Class", as the holder's spec names it), so a
    forked holder finds its library imported too: 0.11-0.27 CPU-s more per holder, measured per backend."""
    for entry in entries:
        try:
            importlib.import_module(entry.partition(":")[0])
        except Exception:  # noqa: BLE001 - the holder that needs it imports it again and reports why
            pass


def _cannot_fork() -> str | None:
    """Why forking now would give a broken holder: a thread (it would not exist in the child, and any lock it
    held would stay held) or gRPC (its fork handling needs settings the lab does not make)."""
    if threading.active_count() != 1:
        return f"{threading.active_count()} threads in the fork server"
    if "grpc" in sys.modules:
        return "gRPC imported in the fork server"
    return None


def _receive(control: socket.socket) -> tuple[bytes, list[int]]:
    """One request and the descriptors that came with it; b"" when the lab has closed its end."""
    fds = array.array("i")
    message, ancillary, _flags, _addr = control.recvmsg(64, socket.CMSG_SPACE((PIPES + 1) * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return message, list(fds)


def _become_holder(fds: list[int], closing: list[int]) -> None:
    """In the child: into the network namespace received after the pipes (when one was), the received pipes as its
    standard streams, then a holder's life; never returns."""
    code = 1
    try:
        if len(fds) > PIPES:
            netns = fds.pop()
            if not enter_netns(netns):
                os._exit(126)  # as a fresh holder's preexec does: it must never run in the lab's network
            os.close(netns)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in closing:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        server = os.getppid()
        die_with_parent()  # with the server, and so with the lab; a process group of its own, as a fresh holder has
        if os.getppid() != server:  # the server died before the signal was asked for
            os._exit(1)
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        process.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _reap(control: socket.socket) -> None:
    """Report every child that has ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        control.send(f"exited {pid} {os.waitstatus_to_exitcode(status)}".encode())


def serve(control: socket.socket) -> None:
    """Fork a holder per request until the lab closes the socket."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # the wake-up pipe says a child ended; _reap finds which
    while True:
        readable, _, _ = select.select([control.fileno(), wake_read], [], [])
        if wake_read in readable:
            while True:
                try:
                    if not os.read(wake_read, 512):
                        break
                except BlockingIOError:
                    break
            _reap(control)
        if control.fileno() not in readable:
            continue
        message, fds = _receive(control)
        if not message:
            return  # the lab closed its end: this server's children die with it
        wanted = {b"fork": PIPES, b"fork-netns": PIPES + 1}.get(message)
        why = _cannot_fork() if wanted is not None and len(fds) == wanted else f"bad request {message[:20]!r}"
        if why is not None:
            for fd in fds:
                os.close(fd)
            control.send(f"refused {why}".encode())
            continue
        pid = os.fork()
        if pid == 0:
            _become_holder(fds, [control.fileno(), wake_read, wake_write])
        for fd in fds:
            os.close(fd)
        try:
            os.setpgid(pid, pid)  # as the child does: its group exists before the lab hears of it, whichever runs first
        except OSError:
            pass  # the child ended already: its exit is reported as any other
        control.send(f"forked {pid}".encode())


def main() -> None:
    die_with_parent()  # the lab's death ends this server, and this server's ends its children
    control = socket.socket(fileno=int(sys.argv[1]))
    _preload(sys.argv[2:])
    serve(control)


if __name__ == "__main__":
    main()
