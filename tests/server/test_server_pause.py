"""The lock's own server stopped past the TTL (scenarios/server_pause.py): the session's real Redis and etcd, and a
PostgreSQL of the trial's own for a lock that lives in PostgreSQL."""

import psutil
import pytest

from lab.checkers import ops
from scenarios.server_pause import ServerPause
from tests.server.helpers import outcome_of
from tests.server.test_lease_faults import run

pytestmark = pytest.mark.server


def test_a_stopped_redis_lets_the_lease_lapse_and_the_fence_alone_refuses_the_holder(services, engines):
    m, verdict = run(services, engines, ServerPause(), "redis")
    assert m["evidence"]["process_state"] == "T" and m["evidence"]["service"] == "redis", m["evidence"]
    # Who reaches the resumed server first, the holder's renewal or the contender, decides the lease; the
    # contender's requests that timed out meanwhile are in its history as acquires of unknown outcome.
    history = ops.from_json(m["history"])
    timed_out = any(o.process == "contender" and o.f is ops.F.ACQUIRE and o.type is ops.Type.INFO for o in history)
    assert verdict == ("stale write accepted" if m["contender"]["acquired"] else "held"), (verdict, timed_out)
    m, verdict = run(services, engines, ServerPause(), "redis_fenced")
    assert verdict in ("stale write rejected", "held"), verdict  # the fence never lets the stale write in
    server = services.embedded["redis"]
    assert all(psutil.Process(pid).status() != psutil.STATUS_STOPPED for pid in server.pids)  # healed


def _stopped_then_continued(evidence: dict, holds_a_session: bool = True) -> None:
    """The evidence a PostgreSQL pause leaves: its postmaster and every backend it had (the holder's own session's
    among them, for a lock held by a session or inside a write) seen in state T; all of them continued since."""
    assert evidence["process_state"] == "T" and evidence["service"] == "postgres", evidence
    assert evidence["server"] == "the trial's own" and evidence["still_stopped_after_heal"] == [], evidence
    postmaster, backends = evidence["pids"][0], evidence["pids"][1:]
    assert backends and evidence["processes_stopped"] > 1, evidence
    assert not holds_a_session or evidence["holder_session_stopped"] in backends, evidence
    for pid in evidence["pids"]:
        try:
            assert psutil.Process(pid).status() != psutil.STATUS_STOPPED, pid
        except psutil.NoSuchProcess:
            pass  # a backend that ended after the heal (its idle guard had expired meanwhile, the trial's own server)


def test_a_paused_postgresql_ends_the_holders_idle_transaction_at_resume_and_xact_rolls_it_back(services, engines):
    """A lock inside the write (xact) on a PostgreSQL of the trial's own, postmaster and backends SIGSTOPped past
    the TTL: the contender's write waits on the stopped server (nobody gets in while it is paused); at SIGCONT the
    holder's transaction has been idle past its guard, PostgreSQL ends it, and the contender's write goes in."""
    m, verdict = run(services, engines, ServerPause(), "xact")
    _stopped_then_continued(m["evidence"])
    assert m["point"] == "after_delete"
    assert m["contender"]["write"] == "committed" and m["contender"]["in_at"] > m["healed_at"], m["contender"]
    assert m["holder"]["write"] == "failed" and verdict == "rolled back", (verdict, m["holder"])
    assert m["runs_in_final"] == ["contender"] and m["rows_final"] == 250


def test_a_lease_row_lapses_on_the_paused_databases_own_clock_and_nobody_gets_in_until_it_resumes(services, engines):
    """The lease row's TTL is kept by clock_timestamp(), which runs on while the server is stopped; the holder's
    renewals time out meanwhile (it is told), and the contender's requests wait or time out too: nobody is granted
    anything until SIGCONT. Then whoever the server serves first has it, and the fence keeps the company whole."""
    m, verdict = run(services, engines, ServerPause(), "lease_row")
    _stopped_then_continued(m["evidence"], holds_a_session=False)  # its lock is a row, held by no session
    renewals = [s for s in m["holder"]["signals"] if s["via"] == "renew()"]
    assert renewals and m["fault_at"] < renewals[0]["at"] < m["healed_at"], m["holder"]["signals"]
    if m["contender"]["acquired"]:
        assert m["contender"]["granted_at"] > m["healed_at"], m["contender"]
    assert verdict in ("held", "intact (250 rows)", "stale write rejected"), verdict
    assert m["rows_final"] == 250 and len(m["runs_in_final"]) == 1, m


def test_a_session_lock_with_the_guard_off_outlives_the_pause_and_the_cell_says_not_exercised(services, engines):
    """With no idle guard nothing on the server times the holder's session out: after SIGCONT the lock is still
    the holder's, the contender gets it only once the holder has written and released, and the trial is not
    exercised (a ○, not a pass)."""
    m, verdict = run(services, engines, ServerPause(), "session_guard_off")
    _stopped_then_continued(m["evidence"])
    outcome = outcome_of(ServerPause(), m, "session_guard_off")
    assert verdict in ("held", "intact (250 rows)") and outcome["exercised"] is False, outcome
    assert m["holder"]["write"] == "committed" and m["holder"]["release"] == "released", m["holder"]
    if m["contender"]["acquired"]:
        assert m["contender"]["granted_at"] > m["holder"]["write_at"], m


def test_every_lock_in_postgresql_is_run_on_a_server_of_its_own_beside_the_others(services):
    """Not run before (the lab would not pause the run's PostgreSQL): each such trial pauses a PostgreSQL of its
    own (scenarios/_own_store.py), so it applies, can run here, and runs beside the other trials."""
    from backends import load
    from scenarios.base import TrialSpec

    for name in ("xact", "serializable", "idempotent", "lease_row", "session", "pglock_session", "tooz_pgsql"):
        assert ServerPause().fault().applies_to(load(name)) is None, name
        assert ServerPause().fault().cannot_run(load(name), services) is None, name
        assert not ServerPause().exclusive(TrialSpec("server_pause", name, "sigstop", 0), services), name


def test_a_sql_lock_whose_server_is_not_the_trials_own_is_not_run_never_n_a(services):
    """Pausing a PostgreSQL the run's trials share (no temp dir to start one of the trial's own in) would stop them
    all: the lab does not, and says *not run*, which every decision counts as unknown."""
    from dataclasses import replace

    from backends import load
    from lab.checkers.outcomes import SkipKind, skip_kind_of

    assert ServerPause().not_run_here(load("xact"), services) is None
    reason = ServerPause().not_run_here(load("xact"), replace(services, tmp=None))
    assert skip_kind_of(reason) is SkipKind.NOT_RUN and "of the trial's own" in reason, reason


def test_it_strikes_the_lock_server_a_backend_declares_unless_that_is_redlocks_independent_masters(services):
    """Chosen by declaration: the backend's lock_service and what the lab's server of it is (Pausable, not
    RedlockMasters), never a list of names; a ZooKeeper lock qualifies the same way (tests/server/test_zookeeper.py)."""
    from backends import load

    fault = ServerPause().fault()
    assert fault.cannot_run(load("redis"), services) is None and fault.cannot_run(load("etcd_fenced"), services) is None
    assert fault.applies_to(load("redlock")) is None  # nothing in its declaration rules it out ...
    assert "independent Redis masters" in fault.cannot_run(load("redlock"), services)  # ... its server does
