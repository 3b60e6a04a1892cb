"""A managed failover on the user's own service (a Patroni cluster, Sentinels): each subject in turn with the
user's own command, as the patroni and sentinel scenarios run when the lab did not start the servers.
"""

from __future__ import annotations

from typing import Callable

import backends
from lab.checkers.outcomes import NotRun
from lab.errors import Interrupted
from lab.faults.commanded import CommandedFault
from scenarios.base import Skip, TrialEnv
from scenarios.events import EventOutcome, SubjectOutcome


def each_in_turn(subjects: list[TrialEnv], trial: Callable[[TrialEnv], dict]) -> EventOutcome:
    """Every subject's trial, one after the other; an error is that subject's alone (a Skip: it does not run
    here), as a trial's would be."""
    return EventOutcome([_one_subject(env, trial) for env in subjects])


def _one_subject(env: TrialEnv, trial: Callable[[TrialEnv], dict]) -> SubjectOutcome:
    try:
        return SubjectOutcome(env.spec, trial(env))
    except Interrupted:
        raise
    except Exception as exc:  # this subject's alone
        return SubjectOutcome(env.spec, failed=exc)


def commanded_fault(env: TrialEnv, commanded: dict[str, type[CommandedFault]], lab_only: str) -> CommandedFault:
    """The user's command for the subject's variant; a Skip when the variant runs on the lab's servers only
    (lab_only: why) or the command cannot reach the subject's lock."""
    cls = backends.load(env.spec.backend)
    kind = commanded.get(env.spec.variant)
    if kind is None:  # a configuration the lab sets only on its own servers: *not run* on yours
        raise Skip(lab_only if isinstance(lab_only, NotRun) else NotRun(lab_only))
    fault = kind()
    reason = fault.cannot_run(cls, env.services)
    if reason is not None:
        raise Skip(reason)
    return fault
