"""The holder's whole process stopped (SIGSTOP) for longer than the TTL, then resumed (SIGCONT).

Kleppmann's garbage-collection pause: every thread stops, keep-alives included,
so a lease lapses while its holder still believes it holds it.
"""

from scenarios._lease_faults import LeaseFaultScenario


class Pause(LeaseFaultScenario):
    name = "pause"
    fault = "pause"
    summary = "holder process SIGSTOPped past the TTL at its fault point, then SIGCONTed; a contender tries meanwhile"
    variants = ("sigstop",)
    params = {
        "quick": {"ttl_s": 1.0, "trials": 1, "parallel": 12},
        "default": {"ttl_s": 2.0, "trials": 3, "parallel": 12},
    }

