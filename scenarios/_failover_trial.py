"""One trial shape for a lock service of several servers losing one while a holder holds (a failover,
a restarted Redlock master).

As the lease-fault trial (scenarios/_lease_faults.py): a holder process takes the lock and stops at
its fault point; the fault fails the service over; after one TTL a contender asks; the holder goes
on and writes. Two things differ. The servers are the trial's own (a primary and a standby or
replica, started by the scenario), and the contender may ask another address than the holder
(the promoted replica, when the holder's client does not follow a failover). And a grant may never
come back: a commit that waits for a synchronous standby, or a WAIT that no replica answers, ends
without one; such a holder never believed it held, and the trial says so instead of failing.

The steps are those of one fault event (scenarios/_shared_event.py): a trial here is an event with one subject,
and a scenario whose fault is the same for every backend (patroni, failover) runs one event for all of them.
"""

from __future__ import annotations

from typing import Callable

from lab.checkers.verdict import Verdict
from lab.faults import Fault
from lab.servers.services import Services
from scenarios._shared_event import (GRANT_WITHIN_S, NEVER_ACKNOWLEDGED, WRITE_WITHIN_S, GrantWait, Hook, Shape,
                                     acquire_event, shared_event)
from scenarios.base import TrialEnv, judged
from scenarios.events import EventOutcome

__all__ = ["GRANT_WITHIN_S", "NEVER_ACKNOWLEDGED", "WRITE_WITHIN_S", "GrantWait", "Hook", "Shape", "acquire_event",
           "failover_judgement", "failover_trial"]


def failover_trial(env: TrialEnv, fault: Fault, *, contender_services: Services | None = None,
                   before_holder: Hook | None = None, once_held: Hook | None = None,
                   grant: GrantWait = acquire_event, holder_options: dict | None = None,
                   ask_after: float | None = None, patience: float | None = None,
                   at_fault: Callable[[float], None] | None = None, settle: Hook | None = None,
                   guard_s: float | None = None, retry_errors: bool = False,
                   before_contender: Hook | None = None) -> dict:
    """One trial of this shape: the event of scenarios/_shared_event.py with env its only subject, on env's servers
    (the scenario's own); its measures, or the exception that ended it. The contender asks contender_services if
    given.

    holder_options: the holder's own lock options beyond the TTL (the contender gets the TTL alone).
    ask_after: seconds from the fault to the contender's first try (default one TTL and a grace), and
    patience how long it keeps trying (default one more TTL): 0 and 0 ask once, while the lease lives.
    at_fault: called once the fault was injected, with the moment its injection began (a probe starts then).
    guard_s: the holder's idle_in_transaction_session_timeout (default one TTL, the post's guard); a fault that
    lasts longer than that on a server that stays up would otherwise be a test of the guard.
    before_contender: once the fault is confirmed, until the contender's way to the servers leads to the new
    primary (a health-checked route that has not yet marked it up).
    retry_errors: the contender asks again after an error from the servers (a route that has no primary yet), as
    a retrying job would; each error stays in the history as an acquire nobody knows the outcome of. A contender
    whose client cannot even be made (tooz's coordinator writes as it starts, and a primary without a replica
    refuses) is then made again inside its job, each failure such an error."""
    shape = Shape(before_holder=before_holder, once_held=once_held, grant=grant, holder_options=holder_options,
                  ask_after=ask_after, patience=patience, at_fault=at_fault, settle=settle, guard_s=guard_s,
                  retry_errors=retry_errors, before_contender=before_contender, contender_services=contender_services)
    outcome: EventOutcome = shared_event([env], fault, shape)
    return outcome.only()


def failover_judgement(measures: dict, backend_cls) -> Verdict:
    """The checkers' verdict; a grant that never came back is quoted, since such a holder never believed it held."""
    return judged(measures, backend_cls, **({"grant": NEVER_ACKNOWLEDGED}
                                            if measures.get("grant") == NEVER_ACKNOWLEDGED else {}))
