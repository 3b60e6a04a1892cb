"""The clock of the lock's server jumps forward or runs fast while a holder holds (lab/faults/server_clock.py).

A lease is only as good as the clock that expires it. Each trial starts the lock's server for itself on a
fake clock (libfaketime, that process alone), the holder takes the lock there and stops at its fault point,
the server's clock moves, and a contender asks at once, while the holder's lease still runs on every other
clock; then the holder writes. Four columns:
- jump: the Redis or the lease row's PostgreSQL jumps forward by two TTLs;
- fast: that server's clock (or one granting Redlock master's) runs twice as fast until the heal;
- kleppmann: Redlock over five masters, the grant on exactly three, and one of those three jumps forward by
  two TTLs (Kleppmann's case: the contender then holds a majority beside the holder);
- kleppmann_control: the same trial with no jump, which must stay safe.
ZooKeeper's JVM runs on the fake clock too (its wall clock, read back from the mtime it stamps on a znode); etcd's
cells are *not run*, with the reason measured on its binary (static: no preload reaches it).
"""

from __future__ import annotations

from lab.declarations.capabilities import Capability
from lab.declarations.columns import FaultFamily
from lab.faults import GradedFault, RedlockClockControl, RedlockClockFast, RedlockClockJump, ServerClockFast, ServerClockJump
from lab.measures.kinds import Measured
from lab.declarations.where import Service
from scenarios._column_kinds import ColumnKind
from scenarios._lease_faults import LeaseFaultScenario, lease_params, first_applicable


# Its columns: a lock server's clock on every stack, or one Redlock master's; a clock bears on a lease's TTL alone.
LOCK_SERVER_CLOCK = ColumnKind(FaultFamily.CLOCKS, needs=(Capability.LEASE_EXPIRY,))
REDLOCK_MASTER_CLOCK = ColumnKind(FaultFamily.CLOCKS, strikes=(Service.REDLOCK,), needs=(Capability.LEASE_EXPIRY,))


class ServerClock(LeaseFaultScenario):
    name = "server_clock"
    measured = Measured.SERVER_CLOCK
    fault = ServerClockJump
    summary = ("the lock's server (its own, on a fake clock) jumps forward past the TTL or runs fast mid-hold; Redlock "
               "with one granting master of five jumped (Kleppmann's case) and the same with no jump")
    title = "lock server's clock moved"
    # variant -> the faults it runs, the first that applies to a backend by its declarations.
    kinds: dict[str, tuple[type[GradedFault], ...]] = {
        "jump": (ServerClockJump,), "fast": (ServerClockFast, RedlockClockFast),
        "kleppmann": (RedlockClockJump,), "kleppmann_control": (RedlockClockControl,),
    }
    columns = (
        LOCK_SERVER_CLOCK("jump", "lock server's clock jumped forward past the TTL", 10.6,
                          "the Redis, ZooKeeper or lease-row PostgreSQL that keeps the lease, started for the trial with "
                          "libfaketime, has its wall clock jump two TTLs ahead while the holder holds; a contender asks at "
                          "once; confirmed by the server's own clock (Redis TIME, clock_timestamp(), a znode's mtime) read "
                          "two TTLs ahead of the real one"),
        LOCK_SERVER_CLOCK("fast", "lock server's clock running twice as fast", 10.7,
                          "the same server's (or one granting Redlock master's) wall clock runs at twice the real rate from "
                          "the holder's grant; a contender asks until 0.9 TTL after that grant; confirmed by two readings of "
                          "the server's clock"),
        REDLOCK_MASTER_CLOCK("kleppmann", "a granting Redlock master's clock jumped (Kleppmann)", 21.5,
                             "Redlock over five masters of the trial's own, the holder's grant on exactly three (two refuse SET "
                             "while it asks); one of those three has its clock jump two TTLs ahead and a contender asks all five "
                             "at once; confirmed by that master's TIME and the key gone from it"),
        REDLOCK_MASTER_CLOCK("kleppmann_control", "the same Redlock trial, no jump", 21.6,
                             "the Kleppmann trial with no jump (the control): the struck master's clock read within a few "
                             "milliseconds of the real one and the key still on three masters"),
    )
    # Each trial starts its own lock server(s); a lease row's PostgreSQL takes an initdb (about 2 s).
    params = lease_params(parallel=2)

    def fault_for(self, variant: str, backend_cls) -> type[GradedFault]:
        return first_applicable(self.kinds[variant], backend_cls)
