"""Rules the lock inside the transaction depends on (the post's rules 3 and 4), each shown for real.

lock_timeout_retry: a waiter's lock_timeout fires while another run holds the
company; the waiter retries the company instead of skipping it.
sorted_batches / opposite_batches: two runs lock the same companies in one
transaction each; in sorted order they queue, in opposite orders PostgreSQL's
deadlock detector has to abort one of them.
"""

from __future__ import annotations

from lab.declarations.capabilities import Capability
from lab.checkers.outcomes import NotRun
from lab.measures.kinds import Measured
from scenarios._two_runs import two_runs
from scenarios.base import Scenario, TrialEnv

DEADLOCK_DETECTED = "40P01"


class Rules(Scenario):
    name = "rules"
    measured = Measured.WRITE_RULES
    default_run = True
    summary = "lock_timeout retries the company; sorted vs opposite lock order and deadlocks"
    requires = frozenset({Capability.IN_TRANSACTION})
    variants = ("lock_timeout_retry", "sorted_batches", "opposite_batches")
    params = {
        "quick": {"trials": 2, "parallel": 8, "hold_s": 0.6, "lock_timeout_ms": 150, "batch": 5},
        "default": {"trials": 5, "parallel": 10, "hold_s": 1.0, "lock_timeout_ms": 200, "batch": 5},
    }

    def applies_to(self, backend_cls) -> str | None:
        """The rules as PostgreSQL words them: lock_timeout (55P03) and its deadlock detector (40P01). A lock inside
        a MariaDB transaction has both in other forms (innodb_lock_wait_timeout in whole seconds, longer than these
        holds; InnoDB's deadlock error), which the lab does not run: not run, never n/a."""
        reason = super().applies_to(backend_cls)
        if reason is None and backend_cls.lock_service != "postgres":
            return NotRun(f"the post's rules 3 and 4 are measured in PostgreSQL's words (lock_timeout, 40P01); "
                          f"this lock is on {backend_cls.lock_service}")
        return reason

    def run_trial(self, env: TrialEnv) -> dict:
        if env.spec.variant == "lock_timeout_retry":
            return self._lock_timeout(env)
        return self._batches(env, sort=env.spec.variant == "sorted_batches")

    def _lock_timeout(self, env: TrialEnv) -> dict:
        hold = env.params["hold_s"]

        def hold_lock(name, conn, sync):
            if name == "after_lock":
                sync.started.set()
                env.pause(hold)  # run1 keeps the company while run2's lock_timeout fires

        options = {"lock_timeout_ms": env.params["lock_timeout_ms"], "lock_timeout_retries": 50}
        result = two_runs(env, hold_lock, options=options)
        return {"hold_s": hold, "lock_timeout_ms": env.params["lock_timeout_ms"], **result.measures()}

    def _batches(self, env: TrialEnv, sort: bool) -> dict:
        companies = list(range(1, env.params["batch"] + 1))

        def interleave(name, conn, sync):
            # After run1's first lock, let run2 take its own first lock before run1 goes on.
            if name == "after_lock" and not sync.started.is_set():
                sync.started.set()
                env.pause(0.2)

        result = two_runs(env, interleave, options={"sort_batches": sort},
                          companies=(companies, list(reversed(companies))), batch=True)
        measures = result.measures()
        measures["deadlocks"] = sum(run["sqlstate"] == DEADLOCK_DETECTED for run in measures["runs"])
        measures["order"] = "sorted" if sort else "opposite"
        return measures

    def verdict(self, measures: dict) -> str:
        if "deadlocks" in measures:
            return "deadlock" if measures["deadlocks"] else "no deadlock"
        waiter = measures["runs"][1]
        if waiter["outcome"] == "committed" and waiter["failed_attempts"] > 0:
            return "timed out, retried, rebuilt"
        return "rebuilt without timing out" if waiter["outcome"] == "committed" else "company skipped"
