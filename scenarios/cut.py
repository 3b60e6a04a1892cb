"""The holder's connection to its lock service blackholed (no RST, bytes stop) past the TTL, then restored."""

from lab.columns import Column, FaultFamily
from scenarios._lease_faults import LeaseFaultScenario


class Cut(LeaseFaultScenario):
    name = "cut"
    driver_axis = True  # the driver decides whether the lock connection sits in a transaction
    default_run = True
    fault = "cut"
    summary = "holder's lock connection blackholed through a loopback proxy past the TTL, then restored"
    variants = ("blackhole",)
    title = "lock connection cut past the TTL"
    breaks_leases = True
    columns = (
        Column("blackhole", "lock connection cut past the TTL", 8,
               "a loopback proxy on the lock's connection stops relaying (no RST) for longer than the TTL; "
               "confirmed by the bytes it carried before and none during the cut",
               family=FaultFamily.NETWORK, happens_when=()),
    )
    params = {
        "quick": {"ttl_s": 1.0, "trials": 1, "parallel": 12},
        "default": {"ttl_s": 2.0, "trials": 3, "parallel": 12},
    }

