"""The post's kill test: a run's session ends after its delete and before its commit.

Run1 takes the company, deletes its rows and keeps working; run2 arrives and
waits; run1's write session is then terminated. With the lock inside the
transaction, the dead run's delete and its lock vanish together.
"""

from __future__ import annotations

import time

from lab.checkers.verdict import Verdict
from lab.declarations.columns import Column, FaultFamily
from lab.faults import terminate_confirmed
from lab.measures.kinds import Measured
from lab.declarations.pacing import Pacing
from lab.servers import sessions
from scenarios._two_runs import two_runs
from scenarios.base import Scenario, TrialEnv, judged


class Kill(Scenario):
    name = "kill"
    measured = Measured.RUN_KILLED
    # The sequential rule: a cell whose trials disagree runs up to three more.
    pacing = Pacing(extra_trials_when_varied=3)
    default_run = True
    summary = "run1's write session terminated after its delete, before its commit, while run2 waits"
    title = "the write session killed"
    columns = (
        Column("after_delete", "write session killed mid-write", 6,
               "pg_terminate_backend (KILL CONNECTION on MariaDB) on the holder's write session after its DELETE, "
               "before its INSERT; confirmed as the lock session's kill is",
               family=FaultFamily.KILL_POINTS, happens_when=(), strikes=("postgres", "mariadb")),
    )
    params = {
        "quick": {"trials": 1, "parallel": 8, "wait_for_run2_s": 5.0, "work_s": 0.2},
        "default": {"trials": 3, "parallel": 8, "wait_for_run2_s": 5.0, "work_s": 0.5},
    }

    def run_trial(self, env: TrialEnv) -> dict:
        seen = {"run2_pid": None, "run2_blocked": False, "killed_at": None}
        t0 = time.monotonic()

        def note_run2_pid(name, conn):
            if name == "begin":
                seen["run2_pid"] = sessions.session_id(conn)

        def kill_after_delete(name, conn, sync):
            if name != "after_delete":
                return
            sync.started.set()
            # End run1's session only once run2 is blocked behind it (or has left, refused).
            deadline = time.monotonic() + env.params["wait_for_run2_s"]
            while time.monotonic() < deadline and not sync.second_done.is_set():
                pid = seen["run2_pid"]
                if pid is not None and sessions.waiting_on_lock(env.monitor, pid):
                    seen["run2_blocked"] = True
                    break
                env.pause(0.01)
            env.pause(env.params["work_s"])  # run1 "keeps working" with run2 queued behind it
            killed_at = round(time.monotonic() - t0, 3)
            seen["evidence"] = terminate_confirmed(env.monitor, sessions.session_id(conn))  # or the trial errors
            seen["killed_at"] = killed_at

        result = two_runs(env, kill_after_delete, note_run2_pid)
        holder = result.first.rebuilds[0] if result.first.rebuilds else None
        return {**result.judged_measures(), **seen, "holder_error": holder.error if holder else None}

    def judge(self, measures: dict, backend_cls) -> Verdict:
        """The checkers: with the lock in the killed session, run1 rolled back and run2 got in; a run-level lock
        lives on another session, so run2 is refused and the kill never reached the lock (held)."""
        return judged(measures, backend_cls)
