"""Did the holder's lease demonstrably hold? A pure function of a trial's history.

Why: a trial in which nobody else got in has not shown that the lease held. Its lease may have lapsed while no
contender asked in time (under a fast clock, python_redis_lock's release raised NotAcquired and sherlock's renewal
returned False, with nobody else granted). Only the holder's own operations after its grant say what its lease
did: a renewal or a release that succeeded, or held() answering true (what the lock's server says), shows it
held; a renewal that failed, a release that raised (a release never lies: it raises when the lock was already
gone) or held() answering false shows it was gone, and outweighs any success beside it.
"""

from __future__ import annotations

from lab.checkers.ops import F, Op, Type
from lab.checkers.verdict import Finding, Valid

CHECKER = "lease held"


def _shows_held(op: Op) -> bool | None:
    """True: this op of the holder shows its lease held; False: gone; None: neither (an invoke, an info, others)."""
    if op.f in (F.RENEW, F.RELEASE) and op.type in (Type.OK, Type.FAIL):
        return op.type is Type.OK
    if op.f is F.HELD and op.type is Type.OK and op.get("held") is not None:
        return bool(op.get("held"))
    return None


def lease_held(history: list[Op]) -> Finding:
    """TRUE: after its run-level grant the holder renewed or released successfully, or its server said it held, and
    nothing of its own said otherwise; FALSE: a renewal failed, a release raised, or held() said it no longer held
    (the proof: those operations); UNKNOWN: nobody was granted a run-level right, or nothing shows either way.

    The holder is the first process granted a run-level right; its operations before that grant say nothing."""
    grant = next((i for i, op in enumerate(history) if op.f is F.ACQUIRE and op.type is Type.OK
                  and (op.get("scope", "run") or "run") == "run"), None)
    if grant is None:
        return Finding(CHECKER, Valid.UNKNOWN, None, (), "no run-level grant: no lease to have held")
    holder = history[grant].process
    shown = [(i, said) for i, op in enumerate(history) if i > grant and op.process == holder
             and (said := _shows_held(op)) is not None]
    gone = tuple(i for i, said in shown if not said)
    if gone:
        first = history[gone[0]]
        return Finding(CHECKER, Valid.FALSE, None, gone,
                       f"{holder}'s {first.f.value} at {first.time:.3f}s said its lease was gone")
    if shown:
        last = history[shown[-1][0]]
        return Finding(CHECKER, Valid.TRUE, None, tuple(i for i, _ in shown),
                       f"{holder}'s {last.f.value} at {last.time:.3f}s showed its lease held")
    return Finding(CHECKER, Valid.UNKNOWN, None, (), f"nothing {holder} did after its grant shows its lease held or gone")
