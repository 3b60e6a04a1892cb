"""The two typed skip reasons that are not n/a: *does not run* (this machine lacks what it needs) and *not run* (the
lab cannot make the fault for this lock, although it would reach it).

Why here, in the base layer: a fault (lab/faults), a server (lab/servers), a backend or a scenario may each be the
one that knows it cannot run, and each must say so by type, never by words, so that the report and every decision
tell a lab limit from a lock the fault cannot reach (n/a, a plain string: lab/declarations/where.py). lab.checkers.outcomes
reads them (skip_kind_of) and re-exports them.
"""

from __future__ import annotations


class DoesNotRun(str):
    """A skip reason that says the backend or scenario cannot work here at all (a missing package, a server
    that lacks what a library needs), not that the fault does not apply: the report shows it as *does not
    run*. It reads as its text, 'does not run: <reason>'; records mark it with `runs_here: false`."""

    def __new__(cls, reason: str):
        return super().__new__(cls, f"does not run: {reason}")


class NotRun(str):
    """A skip reason that says the lab cannot run this combination although the fault would reach the lock, its
    fence or its writes (pausing the run's own PostgreSQL would stop every other trial): the report shows it as
    *not run* and every decision counts it as unknown, never as n/a. It reads as 'not run: <reason>'; records
    mark it with `skip: "not run"`."""

    def __new__(cls, reason: str):
        return super().__new__(cls, f"not run: {reason}")
