"""The holder's connection to its lock service blackholed (no RST, bytes stop) past the TTL, then restored."""

from scenarios._lease_faults import LeaseFaultScenario


class Cut(LeaseFaultScenario):
    name = "cut"
    fault = "cut"
    summary = "holder's lock connection blackholed through a loopback proxy past the TTL, then restored"
    variants = ("blackhole",)
    params = {
        "quick": {"ttl_s": 1.0, "trials": 1, "parallel": 12},
        "default": {"ttl_s": 2.0, "trials": 3, "parallel": 12},
    }

