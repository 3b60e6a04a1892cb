"""The holder protocol: a lock client in any language, driven by the lab over its stdin and stdout.

A program that holds a lock with its own language's library becomes a backend (backends/external.py)
by answering a few requests, one JSON object per line. The lab starts it as a child process of the
process that holds the lock (the lab's, or a holder process of its own, lab/holder/process.py), so a
pause stops it with its holder, a kill ends it, and a cut reaches its connections through the
addresses it is given. The lab does the writes itself, through its own workload, with the token the
program reports. This docstring is the protocol's one description; README's "A holder in another
language" walks through an example.

Requests (lab -> program, stdin), each with an `id` the answer repeats:

    {"id": 1, "op": "start", "key": "locklab:...", "ttl_s": 2.0,
     "lock": {SERVICES}, "monitor": {SERVICES}, "settings": {"idle_in_transaction_session_timeout": "2000ms", ...}}
    {"id": 2, "op": "acquire"}   try once for the lock, never wait
    {"id": 3, "op": "renew"}     extend the lease (sent every TTL/3 when the backend declares lease_expiry)
    {"id": 4, "op": "held"}      does the lock's server still hold it for this holder? never by re-acquiring
    {"id": 5, "op": "token"}     the fencing token of the current grant (null when there is none)
    {"id": 6, "op": "release"}   give it back
    {"id": 7, "op": "touch"}     one more query on the lock's own session (session locks only)
    {"id": 8, "op": "stop"}      close every connection (releasing nothing) and forget the lock; a start follows

End of stdin means: close every connection (releasing nothing) and exit. `stop` lets the lab reuse a
program for its next lock of the same backend with new connections (a runtime's start can cost more CPU
than the lock); a program that answers it with UnknownOp is simply ended instead. The program may answer
requests in any order and several may be in flight at once (the keep-alive renews while the run
asks whether it holds).

`lock` holds the addresses to open the lock's connections to: the one route a cut's proxy takes, so
a program that connects anywhere else makes the cut unconfirmable and its trial an error. `monitor`
holds the same servers' own addresses, for asking a server about the lock (held) without going
through a fault. SERVICES has a key per service the backend declares: `"postgres": {"hosts": [[host,
port], ...], "user", "password", "database", "params": {...}}` (several hosts: connect to the one
that accepts writes, as libpq's target_session_attrs=read-write does), `"redis": "redis://:pw@host:port/0"`,
`"redlock": [url, ...]`, `"etcd": "host:port"`. Passwords travel only here, never on the command line.
`settings` are the PostgreSQL settings the lock's session must start with (libpq's startup `options`,
`-c name=value`); a pooler that refuses that parameter ("unsupported startup parameter: options")
gets them with set_config(name, value, false) once connected instead.

Answers (program -> lab, stdout):

    {"id": 2, "type": "ok", "value": VALUE}
    {"id": 2, "type": "fail", "error": {"type": "LockError", "message": "..."}}
    {"id": 2, "type": "info", "error": {"type": "Error", "message": "Connection terminated"}}

`ok`: it happened. `fail`: it certainly did not (the lock is another's, or no longer this holder's);
`error` is what the library said when it said it by an exception, and absent when it said it by a
return value (a false, a count of 0). `info`: nobody knows (a timeout, a connection that broke), with
what the library said. Values: acquire `{"token": int|null, "ttl_s": float|null, "lock_pid":
int|null}` (the TTL the server granted; the PostgreSQL pid of the lock's session, for a lock held on
one); held a boolean; token an int or null; start `{"library": name, "version": version}`; the rest
null. A request the program does not implement gets `fail` with error type "UnknownOp".

At any moment the program may also report what its library said unasked (an 'error' event, a
warning), which the lab records as that library's log line, as it records a Python library's:

    {"said": "Connection is closed.", "source": "ioredis 'error' event"}

Its stderr is recorded the same way, line by line. A line that is not one of these shapes ends the
program's use in one clear error naming it, as does its exit or its silence past a request's timeout:
never a hang, never a traceback.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import threading
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Sequence

from lab.errors import LabError
from lab.servers.clients import redact_text

SHOWN = 160  # characters of a bad line quoted in an error


class Outcome(StrEnum):
    """Jepsen's three completions: it happened, it certainly did not, nobody knows."""

    OK = "ok"
    FAIL = "fail"
    INFO = "info"


@dataclass(frozen=True)
class Said:
    """An error as the program's library named it: its type and its first line."""

    type: str
    message: str

    def __str__(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type


@dataclass(frozen=True)
class Answer:
    """One answer to one request."""

    id: int
    outcome: Outcome
    value: object = None
    error: Said | None = None


@dataclass(frozen=True)
class Remark:
    """Something the library said unasked, or a line of the program's stderr."""

    source: str
    text: str


class ProtocolError(LabError):
    """The program broke the protocol, exited, or did not answer in time: one line that names it."""


class LibraryError(Exception):
    """A `fail` or `info` answer that carried an exception of the program's library.

    Each is raised as a subclass named after the library's own exception type, so what the lab
    records of it (describe_error: "LockError: Cannot extend...") reads as the library said it."""

    said: Said

    @classmethod
    def of(cls, said: Said) -> LibraryError:
        name = said.type if said.type.isidentifier() else "Error"
        error = type(name, (cls,), {})(said.message or said.type)
        error.said = said
        return error


def _said(raw: object, line: str) -> Said | None:
    if raw is None:
        return None
    if isinstance(raw, str):  # a bare message: its type is not known
        return Said("Error", _first_line(raw))
    if isinstance(raw, dict) and isinstance(raw.get("type", "Error"), str):
        return Said(str(raw.get("type") or "Error"), _first_line(str(raw.get("message") or "")))
    raise ProtocolError(f"an answer's error is neither text nor {{type, message}}: {_quote(line)}")


def parse_line(line: str) -> Answer | Remark:
    """One line of the program's stdout as an Answer or a Remark; ProtocolError for anything else."""
    try:
        message = json.loads(line)
    except ValueError:
        raise ProtocolError(f"a line that is not JSON: {_quote(line)}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"a line that is not a JSON object: {_quote(line)}")
    if "said" in message and "id" not in message:
        return Remark(str(message.get("source") or "the program"), _first_line(str(message["said"])))
    request_id = message.get("id")
    if not isinstance(request_id, int) or isinstance(request_id, bool):
        raise ProtocolError(f"an answer without an integer id: {_quote(line)}")
    try:
        outcome = Outcome(str(message.get("type")))
    except ValueError:
        raise ProtocolError(f"an answer whose type is not ok, fail or info: {_quote(line)}") from None
    return Answer(request_id, outcome, message.get("value"), _said(message.get("error"), line))


def _quote(line: str) -> str:
    line = line.rstrip("\n")
    return repr(line if len(line) <= SHOWN else line[:SHOWN] + "...")


def _first_line(text: str) -> str:
    """A program's line as the lab keeps it: its first line, password-free (a library may print its own URL)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return redact_text(lines[0])[:300] if lines else ""


def _thread_network_namespace() -> int | None:
    """A descriptor of the calling thread's network namespace when it is not its process's (a trial that runs
    inside a namespace of its own, netdrop's), so the program is born where its caller's servers are; else None.

    Children are forked by the lab's launcher thread (lab/servers/processes.py), which stays outside."""
    try:
        if os.stat("/proc/thread-self/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino:
            return None
        return os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    except OSError:
        return None


class HolderProgram:
    """One running program that speaks the protocol: requests out, answers back, its remarks logged.

    label names it in every error ("node_redlock's holder program"); remarks and stderr lines go to the
    logger `logger_name` at WARNING, where a holder process relays them as signals."""

    def __init__(self, argv: Sequence[str], cwd: Path, label: str, logger_name: str):
        from lab.servers.processes import popen

        self.label = label
        self.log = logging.getLogger(logger_name)
        netns = _thread_network_namespace()
        try:
            self.proc = popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              cwd=cwd, text=True, bufsize=1, netns=netns)
        except OSError as exc:
            raise ProtocolError(f"{label} could not start ({' '.join(argv)}): {exc.strerror or exc}") from None
        finally:
            if netns is not None:
                os.close(netns)
        if self.proc.stdin is None or self.proc.stdout is None or self.proc.stderr is None:
            raise ProtocolError(f"{label} started without its pipes")
        self._stdin = self.proc.stdin
        self._lock = threading.Lock()  # one writer of stdin at a time, one owner of the bookkeeping
        self._next_id = 0
        self._pending: dict[int, queue.SimpleQueue[Answer | ProtocolError]] = {}
        self._abandoned: set[int] = set()  # requests that timed out: their late answers are dropped
        self._broken: ProtocolError | None = None
        self._stderr: deque[str] = deque(maxlen=20)
        self._stderr_done = threading.Event()
        threading.Thread(target=self._read_answers, args=(self.proc.stdout,), daemon=True,
                         name=f"holder-program-out-{self.proc.pid}").start()
        threading.Thread(target=self._read_stderr, args=(self.proc.stderr,), daemon=True,
                         name=f"holder-program-err-{self.proc.pid}").start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def request(self, op: str, timeout: float, **fields) -> Answer:
        """Send one request and wait for its answer; ProtocolError if the program breaks, ends or stays silent."""
        with self._lock:
            if self._broken is not None:
                raise ProtocolError(str(self._broken))
            self._next_id += 1
            request_id = self._next_id
            answers: queue.SimpleQueue[Answer | ProtocolError] = queue.SimpleQueue()
            self._pending[request_id] = answers
            try:
                self._stdin.write(json.dumps({"id": request_id, "op": op, **fields}) + "\n")
                self._stdin.flush()
            except (OSError, ValueError):  # its stdin is closed: it exited, or we closed it
                del self._pending[request_id]
                raise self._ended() from None
        try:
            answer = answers.get(timeout=timeout)
        except queue.Empty:
            with self._lock:
                self._pending.pop(request_id, None)
                self._abandoned.add(request_id)
            raise ProtocolError(f"{self.label} did not answer {op!r} within {timeout:g} s") from None
        if isinstance(answer, ProtocolError):
            raise ProtocolError(str(answer))
        return answer

    def _read_answers(self, stream) -> None:
        try:
            for line in stream:
                if not line.strip():
                    continue
                try:
                    parsed = parse_line(line)
                except ProtocolError as exc:
                    self._break(ProtocolError(f"{self.label} broke the holder protocol with {exc}"), end=True)
                    return
                if isinstance(parsed, Remark):
                    self.log.warning("%s: %s", parsed.source, parsed.text)
                    continue
                with self._lock:
                    waiting = self._pending.pop(parsed.id, None)
                    late = parsed.id in self._abandoned
                if waiting is not None:
                    waiting.put(parsed)
                elif not late:
                    self._break(ProtocolError(f"{self.label} broke the holder protocol with an answer to id "
                                              f"{parsed.id}, which nobody asked: {_quote(line)}"), end=True)
                    return
        except (OSError, ValueError):
            pass  # the stream was closed under us: the program is being ended
        self._break(self._ended())

    def _read_stderr(self, stream) -> None:
        try:
            for line in stream:
                text = _first_line(line)
                if text:
                    self._stderr.append(text)
                    self.log.warning("stderr: %s", text)
        except (OSError, ValueError):
            pass
        finally:
            self._stderr_done.set()

    def _ended(self) -> ProtocolError:
        try:
            code = self.proc.wait(2)
        except subprocess.TimeoutExpired:
            return ProtocolError(f"{self.label} closed its stdout but is still running")
        self._stderr_done.wait(1)  # its last words, if it wrote any
        said = self._stderr[-1] if self._stderr else "(nothing on stderr)"
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return ProtocolError(f"{self.label} {how}: {said}")

    def _break(self, error: ProtocolError, end: bool = False) -> None:
        """From now on every waiting and later request raises error; end: the program broke the protocol,
        so it is ended too (whatever it does next cannot be read)."""
        with self._lock:
            if self._broken is None:
                self._broken = error
            waiting, self._pending = list(self._pending.values()), {}
        for answers in waiting:
            answers.put(self._broken)
        if end:
            self.kill()

    def close(self, grace: float = 5.0) -> None:
        """End of stdin: the program closes its connections (releasing nothing) and exits; killed after grace."""
        with self._lock:
            try:
                self._stdin.close()
            except (OSError, ValueError):
                pass
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL, as a crash: its sockets close with it and nothing is released (continued first if stopped)."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGCONT)
                self.proc.kill()
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
