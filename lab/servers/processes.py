"""Start and stop server processes so that none outlives the lab.

Every child gets PR_SET_PDEATHSIG: if the lab itself dies without running its
cleanup (SIGKILL, a crash), the kernel still ends the server.
"""

from __future__ import annotations

import ctypes
import errno
import os
import pwd
import queue
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Protocol, Sequence

from lab.errors import ServiceError

_PR_SET_PDEATHSIG = 1
_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


# Where free_port() looks: below the kernel's ephemeral range. An outgoing connection takes its local port from that
# range, so a port handed out there could be taken by any client's connection between free_port() and the server's
# bind (a full run lost a Patroni event of 38 subjects and a trial's Redis that way). Below it only another listener
# can take one. Each process starts at a random place and walks on, so it never hands out the same port twice in a
# row and two processes rarely meet.
LISTEN_PORTS_FROM = 10000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_ports_lock = threading.Lock()
_next_port: int | None = None


def _listen_ports() -> range | None:
    """The ports free_port() hands out: from LISTEN_PORTS_FROM to the ephemeral range's start; None when the
    kernel's range leaves fewer than 1,000 below it (then the kernel chooses)."""
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return range(LISTEN_PORTS_FROM, low) if low - LISTEN_PORTS_FROM >= 1000 else None


def _bindable(port: int) -> bool:
    """Whether a listener could bind 127.0.0.1:port now (no SO_REUSEADDR: a port still in TIME_WAIT is passed over)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, outside the range outgoing connections use."""
    global _next_port
    ports = _listen_ports()
    if ports is None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]
    with _ports_lock:
        if _next_port is None or _next_port not in ports:
            _next_port = random.choice(ports)
        for _ in range(len(ports)):
            port, _next_port = _next_port, ports.start + (_next_port + 1 - ports.start) % len(ports)
            if _bindable(port):
                return port
    raise ServiceError(f"no free TCP port on 127.0.0.1 between {ports.start} and {ports.stop - 1}")


def _forget_next_port() -> None:
    """In a forked child: start from a random place of its own, not where the parent was."""
    global _next_port
    _next_port = None


os.register_at_fork(after_in_child=_forget_next_port)


class _Launcher:
    """One long-lived thread that starts every child process.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process:
    a server restarted from a trial's worker thread would be killed when that pool shut
    down. Forking from this thread, which lives as long as the lab, ties children to the lab.
    """

    def __init__(self):
        self._requests: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable, *args, **kwargs):
        if threading.current_thread() is self._thread:
            return fn(*args, **kwargs)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="locklab-launcher", daemon=True)
                self._thread.start()
        done: queue.Queue = queue.Queue(1)
        self._requests.put((fn, args, kwargs, done))
        ok, value = done.get()
        if ok:
            return value
        raise value

    def _serve(self) -> None:
        while True:
            fn, args, kwargs, done = self._requests.get()
            try:
                done.put((True, fn(*args, **kwargs)))
            except BaseException as exc:  # handed back to the caller's thread
                done.put((False, exc))


_launcher = _Launcher()


# util-linux's setpriv and nsenter (Debian's essential util-linux), found once. Through them the child's parent-death
# signal, user and network namespace are set by a program it execs first, so Python starts it with vfork instead of
# a full fork of the lab, which a preexec_fn forces. With 300 MB and 150 threads, as the lab has in a run's first
# phase, a fork took 85 ms, held the GIL for 11 of them and cost 26 ms of CPU; through setpriv, 11 ms and 2.2 ms
# (benchmarks/bench_spawn.py). That phase starts 3 to 5 children a second, and the lab's threads wait on each fork.
# A preload the child is given (libfaketime's) reaches it through env, not through setpriv and nsenter: loaded in
# each program of the chain, libfaketime finds the semaphore its first load made for the same pid and exits.
SETPRIV, NSENTER, ENV = shutil.which("setpriv"), shutil.which("nsenter"), shutil.which("env")


def popen(argv: Sequence[str], death_signal: int = signal.SIGKILL, *, netns: int | None = None,
          **kwargs) -> subprocess.Popen:
    """subprocess.Popen from the launcher thread, dying with the lab (see _Launcher), in a process group of its own.

    netns: a descriptor of a network namespace (lab/servers/netns.py) the child is born in. Entering
    one takes root, so the child enters first and only then becomes kwargs' user.
    """
    user = kwargs.pop("user", None)
    if SETPRIV is not None and (netns is None or NSENTER is not None):
        runnable(str(argv[0]), kwargs.get("env"), kwargs.get("cwd"))
        passed = tuple(kwargs.pop("pass_fds", ())) + (() if netns is None else (netns,))
        env = kwargs.pop("env", None)
        preload = None if env is None else env.get("LD_PRELOAD")
        if preload is not None and ENV is not None:  # for argv alone: libfaketime loaded twice in one pid fails
            env = {name: value for name, value in env.items() if name != "LD_PRELOAD"}
            argv = [ENV, f"LD_PRELOAD={preload}", *argv]
        return _launcher.run(subprocess.Popen, through_setpriv(argv, death_signal, netns, user), process_group=0,
                             pass_fds=passed, env=env, **kwargs)
    uid = None if user is None else pwd.getpwnam(user).pw_uid  # looked up before the fork, never in it

    def enter_then_drop() -> None:
        if netns is not None and not enter_netns(netns):
            os._exit(126)
        if uid is not None:
            os.setreuid(uid, uid)
        die_with_parent(death_signal)  # after setreuid, which clears the parent-death signal

    return _launcher.run(subprocess.Popen, list(argv), preexec_fn=enter_then_drop, **kwargs)


def runnable(program: str, env: dict[str, str] | None, cwd) -> None:
    """Raise as Popen would for a program that is missing (FileNotFoundError) or not executable (PermissionError):
    behind setpriv, Popen itself would start and setpriv exit 127 or 126, and the caller's 'not installed' is lost."""
    if "/" in program:
        path: str | None = program if os.path.isabs(program) or cwd is None else os.path.join(str(cwd), program)
    else:
        path = shutil.which(program, mode=os.F_OK, path=(env if env is not None else os.environ).get("PATH"))
    if path is None or not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)


def through_setpriv(argv: Sequence[str], death_signal: int, netns: int | None, user: str | None) -> list[str]:
    """argv behind the programs that set up its process before it runs: nsenter into the namespace (its descriptor
    passed open), then setpriv to the user (the real and effective uid, as setreuid does) and the parent-death
    signal, set last because a change of user clears it."""
    prefix: list[str] = [] if netns is None else [str(NSENTER), f"--net=/proc/self/fd/{netns}", "--"]
    assert SETPRIV is not None
    prefix += [SETPRIV, *([] if user is None else [f"--reuid={user}"]),
               "--pdeathsig", signal.Signals(death_signal).name.removeprefix("SIG"), "--"]
    return [*prefix, *map(str, argv)]


def enter_netns(netns: int) -> bool:
    """Move the calling process (single-threaded: a child just forked) into the network namespace the descriptor
    names (lab/servers/netns.py); False when the kernel refused."""
    return _libc.setns(netns, _CLONE_NEWNET) == 0


def die_with_parent(death_signal: int = signal.SIGKILL) -> None:
    """preexec_fn for a child of the lab: the kernel signals it when the lab's starting thread dies.

    It also gets its own process group: a Ctrl-C in the terminal reaches the lab, not the
    child, so the lab decides the order of shutdown.
    """
    _libc.prctl(_PR_SET_PDEATHSIG, int(death_signal))
    os.setpgid(0, 0)


def spawn(argv: Sequence[str], log_path: Path, *, user: str | None = None,
          cwd: Path | None = None, death_signal: int = signal.SIGKILL,
          stdin_text: str | None = None, netns: int | None = None,
          env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start argv with stdout and stderr appended to log_path, dying with the lab.

    stdin_text is written to the child's stdin, then closed: how a secret reaches a server
    without appearing in its command line (which `ps` shows to every user) or in a file.
    env: the child's whole environment (default: the lab's); with_environment() adds to the lab's.
    """
    log = open(log_path, "ab")
    try:
        proc = popen(argv, death_signal, stdout=log, stderr=subprocess.STDOUT,
                     stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE, cwd=cwd, user=user,
                     netns=netns, env=env)
    finally:
        log.close()
    if stdin_text is not None and proc.stdin is not None:  # a pipe, since stdin_text was given
        try:
            proc.stdin.write(stdin_text.encode())
        except BrokenPipeError:
            pass  # the child exited at once; wait_ready reports why from its log
        finally:
            proc.stdin.close()
    return proc


def with_environment(extra: dict[str, str] | None) -> dict[str, str] | None:
    """The lab's environment with extra variables for one child alone (libfaketime's preload), or None for the
    lab's own as it is."""
    return None if not extra else {**os.environ, **extra}


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


def live_pids(proc: subprocess.Popen | None) -> list[int]:
    """The process's pid while it runs, none once it has ended or was never started."""
    return [proc.pid] if proc is not None and proc.poll() is None else []


def kill_and_close(proc: subprocess.Popen) -> None:
    """SIGKILL a child that still runs, reap it, and close the pipes the lab holds to it."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(5)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


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


class HasPort(Protocol):
    port: int


def on_a_free_port(server: HasPort, start: Callable[[], None], attempts: int = 3) -> None:
    """start(), again on a new port when another process took the one free_port() gave: between asking and
    binding, another trial's server or proxy may take it (seen with several trials starting servers at once).
    Only for a first start: a restart must keep its address."""
    for attempt in range(attempts):
        try:
            start()
            return
        except ServiceError as exc:
            if "listening" not in str(exc) or attempt == attempts - 1:
                raise
            server.port = free_port()


def last_log_line(log_path: Path) -> str:
    """The last non-empty line of a server log, for one-line error messages."""
    try:
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"
