"""A lock holder in its own OS process, so a fault can stop it whole (SIGSTOP) like a GC pause.

The parent sends one JSON spec on stdin; the holder acquires, runs the job for
one company, and at the named fault point reports where it is and waits for a
line on stdin, so the parent's fault strikes it there (a SIGSTOP, a cut, a restart).
It reports every step as a JSON line on stdout, stamped with CLOCK_MONOTONIC,
which is one clock for every process on the machine: read by the system call itself, so a holder whose
clocks a fault moves (libfaketime, lab/servers/fake_clock.py) still stamps its reports on the trial's
clock. Such a holder (spec `report_clock`) also reports its own clocks against the real ones, at start and
whenever the parent asks (SIGUSR1). A holder whose spec has `gate` reports `ready` once its backend is made and
asks for its lock only at the parent's word, so the holders of one shared fault event ask together.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from lab.holder import forks
from lab.servers.clients import first_line
from lab.servers.fake_clock import real_monotonic, real_wall

_SPEC_KEYS = ("backend", "backend_entry", "key", "options", "lock_settings", "write_settings", "pg_dsn", "redis_url",
              "etcd_endpoint", "table", "company", "rows", "run_id", "fault_point")



_EMIT_LOCK = threading.RLock()  # library threads report too: one line at a time (reentrant: a signal may report)


def _emit(event: str, **fields) -> None:
    line = json.dumps({"event": event, "t": real_monotonic(), **fields}) + "\n"
    with _EMIT_LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()


class _LogRelay(logging.Handler):
    """Reports each distinct warning a library logs (the "log line" a holder may be told)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.seen: set[tuple[str, str]] = set()

    def emit(self, record: logging.LogRecord) -> None:
        message = first_line(record.getMessage())[:300]
        if (record.name, message) not in self.seen:
            self.seen.add((record.name, message))
            _emit("log", logger=record.name, level=record.levelname, message=message)


def _relay_thread_exception(args) -> None:
    """An exception that ends a library's background thread: only stderr would ever see it."""
    name = args.thread.name if args.thread is not None else "?"
    _emit("thread_exception", thread=name, error=f"{args.exc_type.__name__}: {first_line(str(args.exc_value))[:300]}")


def _listen_to_libraries() -> None:
    from lab.checkers import told

    logging.getLogger().addHandler(_LogRelay())
    threading.excepthook = _relay_thread_exception
    told.listen(lambda via, text: _emit("callback", via=via, text=text))


def _report_clock(*_signal) -> None:
    """Report this process's wall and monotonic clocks against the real ones (at start, and on SIGUSR1 from a
    fault that moved them). A signal handler, not a thread: under libfaketime 0.9.10 every wait of a second
    Python thread for the GIL goes through its pthread_cond_timedwait, and a thread that woke every 50 ms
    made the holder's own work three times slower (measured here)."""
    wall, mono = _offset(time.time, real_wall), _offset(time.monotonic, real_monotonic)
    _emit("clock", wall_offset_s=round(wall, 4), monotonic_offset_s=round(mono, 4))


def _offset(own, real, tries: int = 5) -> float:
    """own() minus real(), the real clock read on both sides of it; of a few tries, the one read closest together
    (on a busy machine a thread can lose the processor between two reads for a tenth of a second)."""
    best = None
    for _ in range(tries):
        before = real()
        mine = own()
        after = real()
        if best is None or after - before < best[0]:
            best = (after - before, mine - (before + after) / 2)
    assert best is not None
    return best[1]


def main() -> None:
    """The holder process: everything it does is reported, nothing is decided here."""
    from lab.errors import LockLost
    from lab.declarations.registry import import_entry
    from lab.servers import sessions
    from lab.servers.services import Services
    from lab.servers.stores import holder_engines
    from lab.workload.contract import BackendContext, describe_error
    from lab.workload.table import CompanyTable

    _listen_to_libraries()
    line = sys.stdin.readline()
    if not line:  # a holder whose lab closed its stdin (or died) before handing it a trial
        return
    spec = json.loads(line)
    if spec.get("report_clock"):
        signal.signal(signal.SIGUSR1, _report_clock)  # Python runs it on the main thread, even inside readline()
        _report_clock()
    services = Services.from_addresses(spec)
    routed = Services.from_addresses(spec["lock_addresses"]) if spec.get("lock_addresses") else None
    sys.path.insert(0, os.getcwd())  # a plugin added with --backend-module lives in the current folder
    backend_cls = import_entry(spec["backend_entry"])
    # The engines on the server its company rows live on, as its class declares (backends/base.py writes_to):
    # PostgreSQL, or MariaDB for a lock whose rows are there.
    store: str = getattr(backend_cls, "writes_to", "postgres")
    monitor, writes = holder_engines(services, store, spec["write_settings"], spec.get("writes_dsn"))
    ctx = BackendContext(services, monitor, writes, CompanyTable(spec["table"]), spec["lock_settings"],
                         spec["options"], routed=routed)
    backend = backend_cls(ctx, spec["key"])
    if spec.get("gate"):  # one of several holders asking together (a shared fault event): at the parent's word
        _emit("ready")
        sys.stdin.readline()
        _emit("asking")  # where its acquire begins, in its history

    def at(name: str, conn=None) -> None:
        if name == "before_commit":
            _emit("commit_asked")  # COMMIT is sent next: the history's bound for when the write took effect
        if name != spec["fault_point"]:
            return
        _emit("at_point", point=name, write_pid=sessions.session_id(conn) if conn is not None else None)
        sys.stdin.readline()  # the fault strikes here; the parent sends a line once it has healed
        _emit("resumed")

    try:
        granted = backend.acquire()
        _emit("acquire", granted=granted, token=backend.token,
              ttl=backend.ttl, lock_pid=backend.lock_pid, note=backend.grant_note)
        if granted:
            at("before_write")
            result = backend.rebuild(spec["company"], spec["rows"], spec["run_id"], at)
            _emit("write", **result.to_dict())
            _emit("held", held=backend.held(), noticed_loss_at=backend.noticed_loss_at,
                  noticed_how=backend.noticed_loss_how)
            try:
                backend.release()
                _emit("release", result="released")
            except LockLost as exc:
                _emit("release", result=f"raised LockLost: {exc}", told=exc.told)
    except Exception as exc:  # reported, so the parent records what happened rather than a hang
        _emit("error", error=describe_error(exc))  # the driver's first line: no SQL text, no parameters
    finally:
        backend.close()
        monitor.dispose()
        writes.dispose()
        _emit("exit")


def start_holder(netns: int | None = None, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A holder process, started now: it does its imports and waits for its spec on stdin."""
    from lab.servers.processes import popen

    return popen([sys.executable, "-m", "lab.holder.process"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True, netns=netns, env=None if env is None else {**os.environ, **env})


class HolderProcess:
    """The parent's handle on a holder: its events, its signals, and its end."""

    def __init__(self, spec: dict, netns: int | None = None, env: dict[str, str] | None = None):
        """netns: a network namespace the holder runs in (lab/servers/netns.py), its sockets with it.
        env: variables added to the lab's environment for the holder alone (a fake clock's preload)."""
        missing = [k for k in _SPEC_KEYS if k not in spec]
        if missing:
            raise ValueError(f"holder spec lacks {missing}")
        forked = forks.fork(netns) if env is None else None
        self.proc = forked or start_holder(netns, env)
        if self.proc.stdin is None or self.proc.stdout is None or self.proc.stderr is None:
            raise RuntimeError("the holder process started without its pipes")
        self._stdin, self._stdout, self._stderr = self.proc.stdin, self.proc.stdout, self.proc.stderr
        self.events: list[dict] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        try:
            self._stdin.write(json.dumps(spec) + "\n")
            self._stdin.flush()
        except BrokenPipeError:
            self.proc.wait(5)
            raise RuntimeError(f"holder exited at start (code {self.proc.returncode}): "
                               f"{self.stderr_tail()}") from None

    def _read(self) -> None:
        for line in self._stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            self.events.append(event)
            self._queue.put(event)
        self._queue.put({"event": "eof"})

    def wait_for(self, name: str, timeout: float) -> dict:
        """The next event called name; TimeoutError if it does not come, RuntimeError if the holder ends."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"holder sent no {name!r} within {timeout:.0f}s") from None
            if event["event"] == name:
                return event
            if event["event"] in ("eof", "exit") and name not in ("eof", "exit"):
                said = next((e["error"] for e in reversed(self.events) if e["event"] == "error"), None)
                raise RuntimeError(f"holder ended before {name!r}: {said or self.stderr_tail()}")

    def go(self) -> None:
        """Let the holder go on: from its fault point, or (a spec with `gate`) from its gate to its acquire."""
        self._stdin.write("go\n")
        self._stdin.flush()

    def finish(self, timeout: float) -> list[dict]:
        """Wait for the holder to exit on its own; kill it if it does not."""
        try:
            self.proc.wait(timeout)
        finally:
            self.kill()
        return self.events

    def kill(self) -> None:
        """Never leave a holder stopped or running: continue it, then kill it."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGCONT)
                self.proc.kill()
                self.proc.wait(5)
            except ProcessLookupError:
                pass
        for stream in (self._stdin, self._stdout, self._stderr):
            try:
                stream.close()
            except (OSError, ValueError):
                pass

    def stderr_tail(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        lines = [ln for ln in (self._stderr.read() or "").splitlines() if ln.strip()]
        return lines[-1] if lines else "(no stderr)"


if __name__ == "__main__":
    main()
