"""Start and stop server processes so that none outlives the lab.

Every child gets PR_SET_PDEATHSIG: if the lab itself dies without running its
cleanup (SIGKILL, a crash), the kernel still ends the server.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Sequence

from lab.errors import ServiceError

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spawn(argv: Sequence[str], log_path: Path, *, user: str | None = None,
          cwd: Path | None = None, death_signal: int = signal.SIGKILL) -> subprocess.Popen:
    """Start argv with stdout and stderr appended to log_path, dying with the lab."""

    def die_with_parent() -> None:
        _libc.prctl(_PR_SET_PDEATHSIG, int(death_signal))
        # Own process group: a Ctrl-C in the terminal reaches the lab, not the servers,
        # so the lab decides the order of shutdown.
        os.setpgid(0, 0)

    log = open(log_path, "ab")
    try:
        return subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=cwd, user=user,
                                preexec_fn=die_with_parent)
    finally:
        log.close()


def stop(proc: subprocess.Popen | None, first_signal: int = signal.SIGTERM,
         grace: float = 15.0) -> None:
    """Ask proc to exit with first_signal, then SIGKILL after grace seconds."""
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.send_signal(first_signal)
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    except ProcessLookupError:
        pass


def wait_ready(check: Callable[[], object], proc: subprocess.Popen, what: str,
               log_path: Path, timeout: float = 30.0) -> object:
    """Poll check() until it returns without raising; fail fast if proc exits."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServiceError(f"{what} exited with code {proc.returncode} while starting: "
                               f"{last_log_line(log_path)}")
        try:
            return check()
        except Exception as exc:  # the server is not up yet; keep the reason for the message
            last_error = exc
            time.sleep(0.05)
    raise ServiceError(f"{what} did not become ready within {timeout:.0f}s: {last_error}")


def last_log_line(log_path: Path) -> str:
    """The last non-empty line of a server log, for one-line error messages."""
    try:
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"
