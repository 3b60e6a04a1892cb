"""The holder's connection to its lock service blackholed (no RST, bytes stop) past the TTL, then restored."""

from lab.declarations.columns import Column, FaultFamily
from scenarios._lease_faults import HolderSideFault


class Cut(HolderSideFault):
    name = "cut"
    summary = "holder's lock connection blackholed through a loopback proxy past the TTL, then restored"
    title = "lock connection cut past the TTL"
    columns = (
        Column("blackhole", "lock connection cut past the TTL", 8,
               "a loopback proxy on the lock's connection stops relaying (no RST) for longer than the TTL; "
               "confirmed by the bytes it carried before and none during the cut",
               family=FaultFamily.NETWORK, happens_when=()),
    )
