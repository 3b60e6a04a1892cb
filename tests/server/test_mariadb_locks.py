"""The four MariaDB locks on a real MariaDB under every guard and fault that reaches them, each asserted as measured.

MariaDB's guard has the post's shape under other names, but a session is "in a transaction" only once it has read
an InnoDB table: SELECT GET_LOCK() alone opens none. So the post's case A (method 1 idle past the guard) does
not reproduce there; the same lock is lost as soon as its connection reads a table first, and wait_timeout ends
every idle session, in a transaction or not. Figures: a 2 s guard, probes at 0.67 s and 3.33 s (the post's t=1 and
t=5 of its 3 s guard); what the server log said; what the holder's next query raised.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from scenarios.calibrate import Calibrate
from scenarios.cases import Cases
from scenarios.cut import Cut
from scenarios.kill import Kill
from scenarios.overlap import Overlap
from scenarios.pause import Pause
from scenarios.base import TrialSpec
from scenarios.restart import Restart
from tests.server.helpers import outcome_of, shared_tmp, trial_env
from tests.server.test_lease_faults import no_holder_left
from tests.server.test_plugins import lab, read_trials

pytestmark = [pytest.mark.server]
needs_mariadb = pytest.mark.os_packages("mariadb-server")
SESSION_LOCKS = ("mariadb_session", "mariadb_session_commit", "mariadb_session_autocommit")
ALL = (*SESSION_LOCKS, "mariadb_row_lock")
GUARD_S = 2.0
IDLE_TIMEOUT = "Got timeout reading communication packets"  # MariaDB's log line for a session a guard ended

# (backend, variant) -> (verdict, the holder's session state right after its last statement), as measured here.
MEASURED = {
    ("mariadb_session", "idle_in_transaction"): ("held", "idle"),  # the post's case A: it does not reproduce
    ("mariadb_session", "read_then_idle_in_transaction"): ("lost", "idle in transaction"),  # case A, after a read
    ("mariadb_session", "query_then_idle_in_transaction"): ("held", "idle"),  # select 1 opens no transaction
    ("mariadb_session", "idle_write_transaction"): ("held", "idle in transaction"),  # it read, it never wrote
    ("mariadb_session", "idle_session"): ("lost", "idle"),  # wait_timeout: any idle session
    ("mariadb_session_commit", "idle_in_transaction"): ("held", "idle"),  # case C, as the post's
    ("mariadb_session_commit", "read_then_idle_in_transaction"): ("lost", "idle in transaction"),
    ("mariadb_session_commit", "query_then_idle_in_transaction"): ("held", "idle"),  # case D: the post's lost
    ("mariadb_session_commit", "idle_write_transaction"): ("held", "idle in transaction"),
    ("mariadb_session_commit", "idle_session"): ("lost", "idle"),
    ("mariadb_session_autocommit", "idle_in_transaction"): ("held", "idle"),  # case B, as the post's
    ("mariadb_session_autocommit", "read_then_idle_in_transaction"): ("held", "idle"),  # AUTOCOMMIT: nothing open
    ("mariadb_session_autocommit", "query_then_idle_in_transaction"): ("held", "idle"),
    ("mariadb_session_autocommit", "idle_write_transaction"): ("held", "idle"),
    ("mariadb_session_autocommit", "idle_session"): ("lost", "idle"),  # case E, as the post's
}


@pytest.fixture(scope="module")
def maria(services, store_engines):
    if "mariadb" in services.unavailable:
        pytest.skip(services.unavailable["mariadb"])
    return store_engines("mariadb")


def run(services, engines, scenario, backend, variant=None, **params):
    """One trial of the scenario (its first variant unless named), quick profile with params over it."""
    variant = variant or scenario.variants[0]
    env = trial_env(services, engines, scenario.name, backend, variant, {**scenario.profile_params("quick"), **params})
    measures = scenario.run_trial(env)
    return measures, outcome_of(scenario, measures, backend)


@needs_mariadb
def test_each_session_lock_under_each_guard_as_measured(services, maria):
    """Fifteen cells, five at once (each sits through its guard): verdict, state, what the server and client said."""
    def one(cell):
        return cell, run(services, maria, Cases(), cell[0], cell[1], timeout_s=GUARD_S)

    with ThreadPoolExecutor(5) as pool:
        results = dict(pool.map(one, MEASURED))
    for (backend, variant), (verdict, state) in MEASURED.items():
        measures, outcome = results[(backend, variant)]
        where = f"{backend} {variant}: {measures}"
        assert outcome["verdict"] == verdict and measures["holder_state"] == state, where
        assert measures["lock_server"] == "mariadb" and measures["timeout_s"] == 2, where
        if verdict == "lost":
            assert measures["probes"][-1]["got"] is True and measures["server_said"] == IDLE_TIMEOUT, where
            assert measures["evidence"]["struck"] and measures["evidence"]["confirmed_by"] == "server log", where
            assert measures["next_query"] == "OperationalError" and "2006" in measures["next_query_error"], where
            assert measures["release"].startswith("raised LockLost"), where
        else:
            assert not any(p["got"] for p in measures["probes"]) and measures["next_query"] == "alive", where
            assert measures["evidence"]["session"] != "gone" and measures["release"] == "released", where
    cases = {m["case"]: (b, v) for (b, v), (m, _) in results.items() if m["case"]}
    assert cases == {"A": ("mariadb_session", "idle_in_transaction"), "B": ("mariadb_session_autocommit",
                     "idle_in_transaction"), "C": ("mariadb_session_commit", "idle_in_transaction"),
                     "D": ("mariadb_session_commit", "query_then_idle_in_transaction"),
                     "E": ("mariadb_session_autocommit", "idle_session")}


@needs_mariadb
def test_kill_connection_ends_the_lock_session_and_a_poller_sees_it_within_one_poll(services, maria):
    measures, outcome = run(services, maria, Calibrate(), "mariadb_session_autocommit")
    assert measures["evidence"]["call"] == "KILL CONNECTION" and measures["evidence"]["pid"] > 0
    assert outcome["verdict"] == "lost within one poll", measures
    assert measures["gap"] is not None and 0 <= measures["gap"] <= 2 * measures["poll"]


@needs_mariadb
def test_a_killed_write_session_rolls_back_with_its_row_lock_and_leaves_a_session_lock_alone(services, maria):
    row, outcome = run(services, maria, Kill(), "mariadb_row_lock")
    assert row["evidence"]["call"] == "KILL CONNECTION" and row["run2_blocked"] is True  # behind the row lock
    assert outcome["verdict"] == "rolled back" and row["rows_final"] == 250 and row["runs_in_final"] == ["run2"]
    session, outcome = run(services, maria, Kill(), "mariadb_session")
    assert outcome["verdict"] == "held" and session["runs"][1]["outcome"] == "refused"  # the lock is on another session


@needs_mariadb
def test_two_runs_at_once_are_kept_apart_by_every_mariadb_lock(services, maria):
    for backend in ALL:
        measures, outcome = run(services, maria, Overlap(), backend)
        assert outcome["verdict"] in ("held", "intact (250 rows)") and measures["rows_final"] == 250, measures
        assert set(measures["rows_seen"]) <= {250, 0}, measures  # no reader saw two rebuilds merged


@needs_mariadb
def test_a_paused_holder_keeps_its_get_lock_and_the_row_lock_rolls_back_under_the_guard(services, maria):
    """No TTL: a stopped holder's GET_LOCK session lives on (it opened no transaction, so the guard passes it by).
    The row lock is held inside the write, idle past idle_transaction_timeout: MariaDB ends it, the write rolls back."""
    for backend in ALL:
        measures, outcome = run(services, maria, Pause(), backend)
        assert measures["evidence"]["process_state"] == "T", measures
        expected = "rolled back" if backend == "mariadb_row_lock" else "held"
        assert outcome["verdict"] == expected, measures
        assert measures["rows_final"] == 250
    assert no_holder_left()


@needs_mariadb
def test_a_cut_lock_connection_is_carried_by_the_proxy_and_decided_by_the_session(services, maria):
    for backend in ALL:
        measures, outcome = run(services, maria, Cut(), backend)
        evidence = measures["evidence"]
        assert evidence["bytes_before"] > 0 and evidence["relayed_during"] == 0, evidence
        assert evidence["session_through_proxy"] > 0  # the processlist saw the session come from the proxy's port
        assert outcome["verdict"] == ("rolled back" if backend == "mariadb_row_lock" else "held"), measures


@needs_mariadb
def test_a_restart_takes_every_get_lock_and_the_holder_writes_on(services, maria):
    """A restart ends the lock's session: a contender takes the lock and the holder, which never hears, writes on.
    The row lock's transaction dies with the server and the write rolls back."""
    run_pids = list(services.embedded["mariadb"].pids)
    for backend in ALL:
        measures, outcome = run(services, maria, Restart(), backend)
        before, after = measures["evidence"]["pids_before"], measures["evidence"]["pids_after"]
        assert before and after and not set(before) & set(after)
        expected = "rolled back" if backend == "mariadb_row_lock" else "stale write accepted"
        assert outcome["verdict"] == expected, measures
        # The whole trial ran on a MariaDB of its own, so the restart reached no other trial: it runs beside them.
        assert measures["evidence"]["server"] == "the trial's own" and not set(before) & set(run_pids)
        assert not Restart().exclusive(TrialSpec("restart", backend, "server_restart", 0), services)
    assert list(services.embedded["mariadb"].pids) == run_pids  # the run's MariaDB was never restarted


@needs_mariadb
def test_a_paused_mariadb_stops_no_other_trial(services, maria):
    """server_pause on a MariaDB lock stops a MariaDB of the trial's own (its lock and its writes there), never the
    run's, so it runs beside the other trials; the run's MariaDB answers throughout."""
    from scenarios.server_pause import ServerPause

    run_pids = list(services.embedded["mariadb"].pids)
    measures, _ = run(services, maria, ServerPause(), "mariadb_session_autocommit")
    evidence = measures["evidence"]
    assert evidence["process_state"] == "T" and not set(evidence["pids"]) & set(run_pids), evidence
    assert evidence["server"] == "the trial's own"
    assert not ServerPause().exclusive(TrialSpec("server_pause", "mariadb_session", "sigstop", 0), services)
    assert list(services.embedded["mariadb"].pids) == run_pids


def test_without_mariadb_every_cell_says_it_does_not_run_and_the_run_goes_on(tmp_path):
    """LAB_MARIADB_SEARCH_PATH empty: the lab finds no MariaDB, as on a machine without the package (this runs
    where it is installed too). No mariadbd starts, every cell of the four locks says why, the run exits 0."""
    from lab.servers.mariadb.server import MISSING, SEARCH_PATH_VARIABLE

    tmp, results = shared_tmp(tmp_path), tmp_path / "r"
    hidden = {SEARCH_PATH_VARIABLE: ""}
    listed = lab("list", env=hidden)
    assert listed.returncode == 0 and all(f"! {name} " in listed.stdout for name in ALL), listed.stdout
    assert MISSING in listed.stdout
    checked = lab("check-backend", "mariadb_session", env=hidden, tmp=tmp)
    assert checked.returncode == 1 and f"mariadb_session does not run against these servers: {MISSING}" in checked.stdout
    ran = lab("run", "--backend", ",".join(ALL), "--scenario", "cases,pause,restart", "--profile", "quick",
              "--results", str(results), env=hidden, tmp=tmp)
    assert ran.returncode == 0, ran.stderr
    [folder] = list(results.iterdir())
    trials = read_trials(folder)
    assert {t["reason"] for t in trials if t.get("runs_here") is False} == {f"does not run: {MISSING}"}
    assert {t["status"] for t in trials} == {"skipped"}
