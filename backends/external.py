"""A lock held by a program in another language: the lab speaks the holder protocol to a declared command.

A new language's lock is a small program (lab/holder/protocol.py says what it answers) and a
declaration: a subclass naming its command, its folder, its language and library, and what it is
(capabilities, services), as any backend does. The program holds the lock with its own library on
the addresses it is given; the lab does the writes through its own workload, with the token the
program reports, renews a lease every TTL/3 by asking the program (as it calls sherlock's renew()),
and treats the program as part of the process that holds it: a pause stops it with its holder (it is
that holder's child), a kill ends it (SIGKILL, so nothing is released), a cut reaches its connections
because they go where `lock` in its start request says.
"""

from __future__ import annotations

import atexit
import os
import shutil
import threading
from pathlib import Path
from typing import ClassVar

from backends._fence import fenced_write
from backends._lease import LeaseBackend
from backends._writes import write_transaction
from backends.base import BackendContext, BareCall, Point, RebuildResult, no_point
from lab.declarations.capabilities import Capability
from lab.holder.protocol import Answer, HolderProgram, LibraryError, Outcome, ProtocolError, Said
from lab.servers.clients import known_settings, pg_hosts
from lab.servers.services import Services

# What a program can hold for the lab: a run-level right on a connection of its own. A lock inside the
# lab's write transaction cannot be another process's, and the rest are shapes of the lab's own writes.
UNSUPPORTED = frozenset({Capability.IN_TRANSACTION, Capability.BATCH_REBUILD, Capability.QUEUE,
                         Capability.SERIALIZABLE, Capability.PARENT_ROW_LOCK, Capability.UNIQUE_MARKER,
                         Capability.NATURAL_KEY, Capability.GUARD_OFF_ON_ROLE, Capability.REPLICA_ACK})
START_TIMEOUT_S = 30.0  # a program's start: its runtime, its modules, its first connections
IDLE_PER_CLASS = 24  # programs kept for reuse, per backend and network namespace


class _Idle:
    """Programs whose backend closed cleanly, stopped (every connection closed, the lock forgotten) and kept for
    the next instance of the same backend in this process: a new run gets new connections, not a new runtime.

    Starting Node.js costs about 0.2 s of CPU; the timing scenario's short runs ask about once a second in each
    of dozens of trials at once, which new processes would turn into more CPU than 2 cores have. A program a
    fault may strike is never shared: a holder process has its own, and abandon() kills a program outright."""

    def __init__(self):
        self._lock = threading.Lock()
        self._programs: dict[tuple[str, int], list[HolderProgram]] = {}
        atexit.register(self.end_all)

    def take(self, name: str) -> HolderProgram | None:
        with self._lock:
            kept = self._programs.get((name, _namespace()), [])
            while kept:
                program = kept.pop()
                if program.proc.poll() is None:
                    return program
        return None

    def give_back(self, name: str, program: HolderProgram, timeout: float) -> None:
        """Stop the program and keep it, or end it (one that cannot stop, or one more than are kept)."""
        try:
            stopped = program.request("stop", timeout).outcome is Outcome.OK
        except ProtocolError:
            stopped = False
        if stopped:
            with self._lock:
                kept = self._programs.setdefault((name, _namespace()), [])
                if len(kept) < IDLE_PER_CLASS:
                    kept.append(program)
                    return
        program.close()

    def end_all(self) -> None:
        with self._lock:
            programs = [p for kept in self._programs.values() for p in kept]
            self._programs.clear()
        for program in programs:
            program.close(grace=2.0)


def _namespace() -> int:
    """The calling thread's network namespace: a program is reused only where it can reach the same servers."""
    try:
        return os.stat("/proc/thread-self/ns/net").st_ino
    except OSError:
        return 0


IDLE = _Idle()


def addresses(services: Services, needed: tuple[str, ...]) -> dict:
    """The start request's SERVICES for the services a backend declares (passwords included: stdin only)."""
    found: dict = {}
    if "postgres" in needed:
        url = services.pg()
        found["postgres"] = {"hosts": [[host or "127.0.0.1", port] for host, port in pg_hosts(url)],
                             "user": url.username, "password": url.password, "database": url.database,
                             "params": {k: v for k, v in url.query.items() if k != "host"}}
    for name, address in (("redis", services.redis_url), ("redlock", services.redlock_urls),
                          ("etcd", services.etcd_endpoint)):
        if name in needed and address is not None:
            found[name] = address
    return found


class ExternalLock(LeaseBackend):
    """A backend whose lock is held by a program of another language, over the holder protocol.

    Declare `command` (argv, run in `folder`), `language`, `library` and what the lock is
    (capabilities: session_lock, lease_expiry, connection_held, fencing, exclusion; services). A lease
    is renewed by the lab's keep-alive through `renew`; a program must not renew on its own, or a
    paused holder's lease would not lapse the way the lab stops it."""

    command: ClassVar[tuple[str, ...]]
    folder: ClassVar[Path]
    answer_timeout_s: ClassVar[float] = 10.0  # at least this long for any answer; a lease waits 3 TTL if longer

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        unsupported = cls.capabilities & UNSUPPORTED
        if unsupported:  # fails the class's load: the registry lists it as broken, with this reason
            raise TypeError(f"{cls.__name__}: a holder program cannot declare {', '.join(sorted(unsupported))}")
        cls.renews = Capability.LEASE_EXPIRY in cls.capabilities

    @classmethod
    def install_line(cls) -> str:
        """The command that installs what the program needs (its packages), for the *does not run* line."""
        return ""

    @classmethod
    def missing(cls) -> str | None:
        """What the program needs and does not find here, in the words of a *does not run* line, or None."""
        if shutil.which(cls.command[0]) is None:
            return f"{cls.command[0]} not found on PATH"
        return None

    @classmethod
    def cannot_run(cls, services: Services) -> str | None:
        return cls.missing()

    def __init__(self, ctx: BackendContext, key: str):
        super().__init__(ctx, key)
        self._lock_pid: int | None = None
        self.program = self._start(ctx.lock_services, key)

    @property
    def timeout(self) -> float:
        return max(self.answer_timeout_s, 3 * self.ttl)

    def _start(self, lock_services: Services, key: str) -> HolderProgram:
        reason = self.missing()
        if reason is not None:
            raise ProtocolError(f"{self.name}'s holder program cannot start: {reason}")
        program = IDLE.take(self.name) or HolderProgram(self.command, self.folder, f"{self.name}'s holder program",
                                                        f"{self.name} program")
        try:
            answer = program.request("start", START_TIMEOUT_S, key=key, ttl_s=self.ttl,
                                     lock=addresses(lock_services, self.services),
                                     monitor=addresses(self.ctx.services, self.services),
                                     settings=session_settings(self.lock_service, self.ctx.lock_settings,
                                                               lock_services))
            if answer.outcome is not Outcome.OK:
                raise LibraryError.of(answer.error or Said("StartFailed", f"start answered {answer.outcome}"))
        except BaseException:
            program.kill()
            raise
        return program

    def _ask(self, op: str, program: HolderProgram | None = None) -> Answer:
        return (program or self.program).request(op, self.timeout)

    @property
    def lock_pid(self) -> int | None:
        return self._lock_pid

    def _try_acquire(self) -> int | None:
        answer = self._ask("acquire")
        if answer.outcome is Outcome.FAIL:
            return None
        if answer.outcome is Outcome.INFO:
            raise _library_error(answer, "acquire")
        value = answer.value if isinstance(answer.value, dict) else {}
        self._lock_pid = _int_or_none(value.get("lock_pid"), "acquire's lock_pid")
        if value.get("ttl_s") is not None and self.renews:
            self.ttl = float(value["ttl_s"])  # as the server granted it
        token = _int_or_none(value.get("token"), "acquire's token")
        if self.fenced and token is None:
            raise ProtocolError(f"{self.name} declares fencing, and its program's acquire reported no token")
        return token if token is not None else 0  # granted; 0 stands for "no token", as the other leases say

    def _renew(self) -> bool:
        return _yes_or_no(self._ask("renew"), "renew")

    def _owned(self) -> bool:
        answer = self._ask("held")
        if answer.outcome is not Outcome.OK:
            raise _library_error(answer, "held")
        if not isinstance(answer.value, bool):
            raise ProtocolError(f"{self.name}'s program answered held with {answer.value!r}, not true or false")
        return answer.value

    def _release(self) -> bool:
        return _yes_or_no(self._ask("release"), "release")

    def current_token(self) -> int:
        """The token the program reports for its grant now: the one its write carries."""
        answer = self._ask("token")
        token = _int_or_none(answer.value, "token") if answer.outcome is Outcome.OK else None
        if token is None:
            raise _library_error(answer, "token") if answer.outcome is not Outcome.OK else ProtocolError(
                f"{self.name} declares fencing, and its program reported no token")
        return token

    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        if self.fenced:
            return fenced_write(self.ctx.writes, self.ctx.company_table, company, rows, run_id,
                                lock_key=self.key, token=self.current_token(), point=point)
        return write_transaction(self.ctx.writes, self.ctx.company_table, [company], rows, run_id, point=point)

    def touch(self) -> None:
        answer = self._ask("touch")
        if answer.outcome is Outcome.OK:
            return
        if answer.error is not None and answer.error.type == "UnknownOp":
            raise NotImplementedError(f"{self.name}'s program has no touch")
        raise _library_error(answer, "touch")

    def bare_call(self, key: str) -> BareCall | None:
        """The program's own acquire and release for key, in a program of its own: the library call, with the
        one protocol line each way that every call of this backend also makes."""
        program = self._start(self.ctx.lock_services, key)

        def release() -> None:
            answer = self._ask("release", program)
            if answer.outcome is not Outcome.OK:
                raise _library_error(answer, "release")

        return BareCall(f"{self.library} ({self.language}) in a holder program of its own: acquire; release",
                        lambda: self._ask("acquire", program).outcome is Outcome.OK, release,
                        lambda: IDLE.give_back(self.name, program, self.timeout))

    def abandon(self) -> None:
        """A killed process: the program is SIGKILLed, so its connections close and nothing is released."""
        self._stop.set()
        self.program.kill()
        self.close()

    def close(self) -> None:
        """Every connection closed, nothing released; the program is kept for the next instance if it is alive."""
        super().close()
        if self.program.proc.poll() is None:
            IDLE.give_back(self.name, self.program, self.timeout)
        else:
            self.program.close()


def _int_or_none(value: object, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(f"{what} must be an integer or null, not {value!r}")
    return value


def _library_error(answer: Answer, op: str) -> LibraryError:
    """The error a program's answer to op reports, or one that says it reported none."""
    return LibraryError.of(answer.error or Said("NoAnswer", f"{op} answered {answer.outcome} without an error"))


def _yes_or_no(answer: Answer, op: str) -> bool:
    """A renew's or a release's answer: done, or refused (the library said so by what it returned); an error is
    raised, whether the library raised it or nobody knows."""
    if answer.outcome is Outcome.OK:
        return True
    if answer.outcome is Outcome.FAIL and answer.error is None:
        return False
    raise _library_error(answer, op)


def session_settings(lock_service: str, lock_settings: dict, lock_services: Services) -> dict:
    """The lock session's settings and every other setting the lab pins, as the lab's own sessions start (a lock on
    PostgreSQL; none elsewhere)."""
    if lock_service != "postgres":
        return {}
    startup = {name: str(value) for name, value in lock_settings.items()}
    pinned = known_settings(lock_services.pg(), {"connect_timeout": 5})
    startup.update({name: "0" for name in sorted(pinned) if name not in startup})
    return startup
