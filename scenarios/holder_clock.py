"""The holder process's own clock jumps back while it holds: which clock does its lock keep time by?

A lease lapses on its server unless the holder renews it in time, and some locks also judge their own
validity on the holder's side. A library that schedules its renewals, or decides it still holds, by the
wall clock goes wrong when that clock steps back (NTP, a VM restored, an operator): its next renewal is
due ten TTLs later, so its lease lapses while it believes it holds. One on the monotonic clock does not
notice. Here the holder process starts with libfaketime (lab/servers/fake_clock.py) and, once it holds,
its wall clock jumps back by ten TTLs: with its monotonic clock left alone (wall_back) or moved with it
(all_back); the control runs the same preloaded holder with no jump. The holder does not stop: it keeps
running its library's renewals while a contender tries for one TTL; then it writes.

Reading the cells together (the report's "which clock" table): a lock whose holder kept it in the control
and lost it with its wall clock back renews by the wall clock; one that kept it both times does not; one
that lost it in the control too keeps no lease alive by itself, so its holder's clock cannot matter.
With libfaketime 0.9.10 the all_back variant cannot run a Python holder at all (measured each run:
`monotonic_fault_hangs`), and its cells say so. One file: the fault and its scenario.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import ClassVar

from lab.declarations.capabilities import Capability
from lab.declarations.columns import FaultFamily
from lab.faults.base import FaultNotConfirmed, GradedFault, Route, Target
from lab.measures.kinds import Measured
from lab.servers import fake_clock
from lab.servers.fake_clock import FakeClock
from lab.servers.services import Services
from scenarios._column_kinds import ColumnKind
from scenarios._lease_faults import LeaseFaultScenario, lease_params

CONFIRM_WITHIN_S = 5.0  # the holder reads its clock file at most once a second (FakeClock.environment)
OFFSET_TOLERANCE_S = 0.1  # the holder reads its two clocks and the real ones within microseconds
ASK_EVERY_S = 0.1


class HolderClockBack(GradedFault):
    """The holder's wall clock (and with fake_monotonic its monotonic clock) jumps back by strength x TTL."""

    name = "holder_clock_back"
    label = "holder's wall clock jumped back ten TTLs"
    default_strength = 10.0
    fake_monotonic: ClassVar[bool] = False

    def __init__(self, strength: float | None = None):
        super().__init__(strength)
        self.folder: Path | None = None
        self.clock: FakeClock | None = None
        self.healed = False

    def applies_to(self, backend_cls) -> str | None:
        if not ({Capability.LEASE_EXPIRY, Capability.CONNECTION_HELD} & backend_cls.capabilities):
            return ("its right is kept by its server for a live session, with nothing for the holder's clock to "
                    "time: no lease to renew")
        return None

    def missing(self) -> str | None:
        """libfaketime itself; with the monotonic clock faked, one that can fake it for a Python process (measured
        once a run: 0.9.10 cannot)."""
        library = fake_clock.find_libfaketime()
        if library is None:
            return fake_clock.MISSING
        return fake_clock.monotonic_fault_hangs(library) if self.fake_monotonic else None

    def prepare(self, services: Services, backend_cls) -> None:
        library = fake_clock.find_libfaketime()
        if library is None:
            raise FaultNotConfirmed(fake_clock.MISSING)
        self.folder = Path(tempfile.mkdtemp(prefix="holder-clock-", dir=services.tmp))
        self.clock = FakeClock(self.folder, "holder", library)

    def route(self, services: Services, backend_cls) -> Route:
        assert self.clock is not None  # prepare() made it
        return Route(holder_environment=self.clock.environment(fake_monotonic=self.fake_monotonic, immediate=False))

    def inject(self, target: Target) -> None:
        if self.clock is None or target.ttl is None:
            raise FaultNotConfirmed("the holder's clock was never set up, or the trial gave no TTL")
        self.clock.jump(-self.strength * target.ttl)

    def confirm(self, target: Target) -> dict:
        assert self.clock is not None and target.ttl is not None
        reading = self._holder_reads(target, self.clock.offset_s)
        return {"fault": self.name, "jump_s": round(-self.strength * target.ttl, 4), "strength_ttls": self.strength,
                "monotonic_faked": self.fake_monotonic, "holder_wall_offset_s": reading["wall_offset_s"],
                "holder_monotonic_offset_s": reading["monotonic_offset_s"]}

    def heal(self, target: Target) -> dict:
        if self.clock is None or self.healed:
            return {}
        self.healed = True
        self.clock.reset()
        if target.holder is None or target.holder.proc.poll() is not None:
            return {}
        reading = self._holder_reads(target, 0.0)
        return {"holder_wall_offset_after_heal_s": reading["wall_offset_s"]}

    def _holder_reads(self, target: Target, expected: float) -> dict:
        """The holder's own report of its clocks, once its wall clock reads expected seconds off the real one
        (and its monotonic clock too when that is faked, the real one otherwise)."""
        if target.holder is None:
            raise FaultNotConfirmed("a holder clock fault needs the holder's process")
        deadline = time.monotonic() + CONFIRM_WITHIN_S
        last = None
        while time.monotonic() < deadline:
            target.holder.proc.send_signal(signal.SIGUSR1)  # the holder reports its clocks (lab/holder/process.py)
            try:
                last = target.holder.wait_for("clock", min(1.0, max(0.05, deadline - time.monotonic())))
            except TimeoutError:
                continue
            except RuntimeError:  # the holder ended
                break
            wall_ok = abs(last["wall_offset_s"] - expected) <= OFFSET_TOLERANCE_S
            if wall_ok and (self.fake_monotonic or abs(last["monotonic_offset_s"]) <= OFFSET_TOLERANCE_S):
                return last
            # Not yet: the holder rereads its clock file at most once a second. Ask again a little later, not in
            # a loop: every report is a signal handled by the holder's main thread and a line of its history.
            time.sleep(ASK_EVERY_S)
        raise FaultNotConfirmed(f"the holder never reported its wall clock {expected:+.2f} s off the real one "
                                f"within {CONFIRM_WITHIN_S:g} s (last report: {last})")

    def close(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


class HolderAllClocksBack(HolderClockBack):
    name = "holder_all_clocks_back"
    label = "holder's wall and monotonic clocks jumped back ten TTLs"
    fake_monotonic = True


class HolderClockControl(HolderClockBack):
    name = "holder_clock_control"
    label = "holder on libfaketime, no jump"
    default_strength = 0.0


# Its columns: the holder's clocks, on every stack; they bear on a right the holder keeps alive (a lease it renews,
# a connection it holds), never on one its server keeps for a live session.
HOLDER_CLOCK = ColumnKind(FaultFamily.CLOCKS, needs=(Capability.LEASE_EXPIRY, Capability.CONNECTION_HELD))


class HolderClock(LeaseFaultScenario):
    name = "holder_clock"
    measured = Measured.HOLDER_CLOCK
    fault = HolderClockBack
    faults = {"wall_back": HolderClockBack, "all_back": HolderAllClocksBack, "control": HolderClockControl}
    summary = ("the holder process's own wall clock (and then its monotonic clock too) jumps back ten TTLs while it "
               "holds and keeps running; a control with no jump")
    title = "holder's clock jumped back"
    columns = (
        HOLDER_CLOCK("control", "holder on libfaketime, no jump (control)", 7.5,
                     "the holder process runs with libfaketime preloaded and its clocks left alone, for two TTLs while a "
                     "contender tries; confirmed by the holder's own report of its clocks (within 0.1 s of the real ones)"),
        HOLDER_CLOCK("wall_back", "holder's wall clock jumped back ten TTLs", 7.6,
                     "the holder's wall clock (CLOCK_REALTIME, through libfaketime in its process alone) jumps back ten "
                     "TTLs while it holds, its monotonic clock untouched; confirmed by the holder's own report of both"),
        HOLDER_CLOCK("all_back", "holder's wall and monotonic clocks jumped back", 7.7,
                     "the same with the holder's monotonic clock faked and moved as well; confirmed the same way"),
    )
    # Three holders at once: a holder process takes a few seconds to start, and on a busy two-core machine six
    # starting together took more than the 30 s the trial waits for a grant (measured, with or without the preload).
    params = lease_params(parallel=3)
