"""A keeper process that adopts a server's orphans and ends them all when it is told to or the lab dies.

Why: some servers start their own children and disown them. Patroni starts postgres through a
short-lived process that calls setsid() and exits (patroni/postgresql/postmaster.py), so the
postmaster is nobody's child and the parent-death signal the lab gives Patroni never reaches it: a
SIGKILL of the lab (or of Patroni) leaves postgres running. The keeper is started by the lab with
`processes.spawn` (it dies with the lab, by SIGTERM), marks itself a child subreaper
(PR_SET_CHILD_SUBREAPER), so every orphan below it is re-parented to it rather than to init, and
starts the server's command as its own child. On SIGTERM or SIGINT it ends everything below it: a
postmaster by SIGQUIT (PostgreSQL's immediate shutdown, which ends its backends too), everything else
by SIGKILL, and SIGKILL to whatever is left after a grace period. A server that dies alone (Patroni
killed by a test) leaves the keeper running with the postgres it orphaned, as on a real host.

Usage: python -m lab.servers.subreaper [--user NAME] -- ARGV...
"""

from __future__ import annotations

import ctypes
import os
import pwd
import signal
import subprocess
import sys
import time

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
GRACE_S = 5.0


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _children_of(pid: int) -> list[int]:
    """The pids whose parent is pid, from /proc (no third-party import: this runs before anything else)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for child in _children_of(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def _is_postmaster(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().strip() == "postgres" and _parent_of(pid) == os.getpid()
    except OSError:
        return False


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[-1].split()[1])


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def end_everything() -> None:
    """Every process below the keeper: postmasters by immediate shutdown, the rest killed; then the stragglers."""
    below = _descendants(os.getpid())
    for pid in below:
        if _is_postmaster(pid):
            _signal(pid, signal.SIGCONT)  # a stopped postmaster would not act on SIGQUIT
            _signal(pid, signal.SIGQUIT)
        else:
            _signal(pid, signal.SIGCONT)
            _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        _reap()
        if not _descendants(os.getpid()):
            return
        time.sleep(0.05)
    for pid in _descendants(os.getpid()):
        _signal(pid, signal.SIGKILL)
    _reap()


def _reap() -> list[tuple[int, int]]:
    """Collect every child that has ended (our own and adopted ones); returns (pid, status) of each."""
    ended: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.append((pid, status))


def main(argv: list[str]) -> int:
    user = None
    if argv[:1] == ["--user"]:
        user, argv = argv[1], argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m lab.servers.subreaper [--user NAME] -- ARGV...", file=sys.stderr)
        return 2
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    stopping = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stopping.append(True))
    uid = None if user is None else pwd.getpwnam(user).pw_uid

    def as_child() -> None:
        if uid is not None:
            entry = pwd.getpwuid(uid)
            os.setgid(entry.pw_gid)
            os.setgroups([])
            os.setuid(uid)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid, which clears it

    server = subprocess.Popen(argv, preexec_fn=as_child, cwd="/")
    print(f"subreaper: started pid {server.pid}", flush=True)
    while not stopping:
        for pid, status in _reap():
            if pid == server.pid:
                print(f"subreaper: pid {pid} ended ({os.waitstatus_to_exitcode(status)})", flush=True)
        time.sleep(0.1)  # SIGCHLD needs no prompt answer: an orphan waits as a zombie until the next look
    end_everything()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
