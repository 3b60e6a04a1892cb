"""The holder's connection to its lock service blackholed (no RST, bytes stop) past the TTL, then restored."""

from scenarios._lease_faults import lease_fault_trial, verdict
from scenarios.base import Scenario, TrialEnv


class Cut(Scenario):
    name = "cut"
    summary = "holder's lock connection blackholed through a loopback proxy past the TTL, then restored"
    variants = ("blackhole",)
    params = {
        "quick": {"ttl_s": 1.0, "trials": 1, "parallel": 12},
        "default": {"ttl_s": 2.0, "trials": 3, "parallel": 12},
    }

    def run_trial(self, env: TrialEnv) -> dict:
        return lease_fault_trial(env, "cut")

    def verdict(self, measures: dict) -> str:
        return verdict(measures)
