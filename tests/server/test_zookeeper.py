"""ZooKeeper from Debian's package, started by the lab, and the two locks on kazoo's Lock under every fault that
reaches them: the server, each fault's verdict (what holds either way where the race is real), what kazoo told the
holder, and a machine without the package, where every cell says why it does not run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psutil
import pytest

from lab.servers.zookeeper.server import MISSING, SEARCH_PATH_VARIABLE
from scenarios.cut import Cut
from scenarios.pause import Pause
from scenarios.restart import Restart
from scenarios.server_pause import ServerPause
from scenarios.zookeeper_partition import ZooKeeperPartition
from tests import os_packages
from tests.server.helpers import (assert_next_lab_sweeps, lab_holding, outcome_of, processes_under, shared_tmp,
                                  sigkill_and_outlived, trial_env)
from tests.server.test_lease_faults import no_holder_left
from tests.server.test_plugins import lab, read_trials

pytestmark = pytest.mark.server
needs_zookeeper = pytest.mark.os_packages("zookeeper")
BACKENDS = ("kazoo", "zookeeper_fenced")


@pytest.fixture(autouse=True)
def kazoo_installed():
    pytest.importorskip("kazoo", reason="kazoo not installed (pip install -e '.[libraries]')")


def run(services, engines, scenario, backend):
    """One quick trial of scenario's first variant: its measures and its outcome as a run records it."""
    variant = scenario.variants[0]
    env = trial_env(services, engines, scenario.name, backend, variant, scenario.profile_params("quick"))
    measures = scenario.run_trial(env)
    assert no_holder_left()
    return measures, outcome_of(scenario, measures, backend)


def either_way(backend: str) -> tuple[str, ...]:
    """The verdicts a race between the holder's session and a contender can give: nobody else got the lock, or
    got it only after the holder's write, or got it first, and then only the fence refuses the holder's write."""
    return ("held", "intact (250 rows)", "stale write rejected" if backend == "zookeeper_fenced" else "stale write accepted")


def heard(measures: dict, text: str) -> list[float]:
    """When kazoo's state listener told the holder `text` (SUSPENDED, LOST), seconds from its grant."""
    return [s["at"] for s in measures["holder"]["signals"]
            if s["how"] == "callback" and s["via"] == "its state listener" and s["text"] == text]


# --- the server -----------------------------------------------------------------------------------------------

@needs_zookeeper
def test_the_embedded_zookeeper_is_debians_on_loopback_in_the_labs_temp_dir(services):
    server = services.embedded["zookeeper"]
    assert services.versions["zookeeper"].startswith("3.8") and services.zk_hosts.startswith("127.0.0.1:")
    [pid] = server.pids
    command = psutil.Process(pid).cmdline()
    assert "org.apache.zookeeper.server.ZooKeeperServerMain" in command and str(services.tmp) in command[-1]
    assert any("/usr/share/java/zookeeper.jar" in part for part in command)
    listening = [c.laddr for c in psutil.Process(pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert listening and all(address.ip == "127.0.0.1" for address in listening), listening  # no admin server


@needs_zookeeper
def test_a_killed_lab_takes_its_zookeeper_with_it_and_the_next_run_removes_its_temp_dir():
    """SIGKILL skips every cleanup handler; the parent-death signal still ends the JVM."""
    child, [pid], left_behind = lab_holding(["zookeeper"])
    assert "ZooKeeperServerMain" in " ".join(psutil.Process(pid).cmdline())
    assert sigkill_and_outlived(child, [pid], within=15) == []
    assert_next_lab_sweeps(left_behind)


@needs_zookeeper
def test_both_locks_keep_every_promise_lab_check_backend_checks(services, capsys):
    from lab.contract import check_backend

    for name in BACKENDS:
        assert check_backend(name, services) == 0
        out = capsys.readouterr().out
        assert f"{name}: 9 of 9 promises kept" in out, out


# --- the faults -----------------------------------------------------------------------------------------------

@needs_zookeeper
def test_a_paused_holder_loses_its_session_and_only_the_fence_refuses_its_write(services, engines):
    plain, outcome = run(services, engines, Pause(), "kazoo")
    assert outcome["verdict"] == "stale write accepted" and plain["contender"]["acquired"]
    # kazoo said SUSPENDED the moment the holder ran again, after the contender's grant and before its write
    assert heard(plain, "SUSPENDED") and plain["contender"]["granted_at"] <= heard(plain, "SUSPENDED")[0]
    assert heard(plain, "SUSPENDED")[0] <= plain["holder"]["write_at"]
    assert plain["holder"]["release"].startswith("raised LockLost: its lock node was gone")
    fenced, outcome = run(services, engines, Pause(), "zookeeper_fenced")
    assert outcome["verdict"] == "stale write rejected", fenced
    assert fenced["contender"]["token"] > fenced["holder"]["token"] > 0  # czxids: the later node's is higher
    assert fenced["runs_in_final"] == ["contender"]


@needs_zookeeper
def test_a_cut_connection_is_suspended_at_once_and_its_session_expires_on_the_server(services, engines):
    for backend, expected in (("kazoo", "stale write accepted"), ("zookeeper_fenced", "stale write rejected")):
        m, outcome = run(services, engines, Cut(), backend)
        assert outcome["verdict"] == expected, m
        assert m["evidence"]["bytes_before"] > 0 and m["evidence"]["relayed_during"] == 0
        # kazoo gives up the silent connection after 2/3 of the session timeout: SUSPENDED, before the grant
        assert heard(m, "SUSPENDED") and heard(m, "SUSPENDED")[0] < m["contender"]["granted_at"]


@needs_zookeeper
def test_a_restarted_zookeeper_keeps_sessions_a_client_resumes_in_time(services, engines):
    """ZooKeeper writes sessions to its log, so a session whose client reconnects within its timeout keeps its lock
    across a restart; kazoo's reconnection backoff decides whether it does within 1 s. Either way: the fault
    struck (new pid), kazoo said SUSPENDED, and the fence never lets a stale write through."""
    for backend in BACKENDS:
        m, outcome = run(services, engines, Restart(), backend)
        before, after = m["evidence"]["pids_before"], m["evidence"]["pids_after"]
        assert before and after and not set(before) & set(after)
        assert heard(m, "SUSPENDED")
        assert outcome["verdict"] in either_way(backend), m
        if m["contender"]["acquired"] and m["contender"]["granted_at"] < m["holder"]["write_at"]:
            assert outcome["verdict"] == either_way(backend)[-1], m  # the session expired: the fence decides


@needs_zookeeper
def test_a_paused_zookeeper_expires_sessions_when_it_runs_again_and_the_fence_never_lets_a_stale_write_through(
        services, engines):
    for backend in BACKENDS:
        m, outcome = run(services, engines, ServerPause(), backend)
        assert m["evidence"]["process_state"] == "T" and m["evidence"]["service"] == "zookeeper"
        assert heard(m, "SUSPENDED")  # the server stopped answering its pings
        assert outcome["verdict"] in either_way(backend), m


@needs_zookeeper
def test_a_partitioned_server_stops_serving_and_the_majority_expires_the_holders_session(services, engines):
    for backend, expected in (("kazoo", "stale write accepted"), ("zookeeper_fenced", "stale write rejected")):
        m, outcome = run(services, engines, ZooKeeperPartition(), backend)
        assert outcome["verdict"] == expected, m
        evidence = m["evidence"]
        assert evidence["isolated"] == evidence["holder_member"] != evidence["contender_member"]
        assert evidence["modes_after"][evidence["holder_member"]] == "not serving"
        assert sorted(v for k, v in evidence["modes_after"].items() if k != evidence["holder_member"]) == \
            ["follower", "leader"]
        assert evidence["relayed_across_partition"] == 0
        assert heard(m, "SUSPENDED") and heard(m, "SUSPENDED")[0] < m["contender"]["granted_at"]
        if backend == "zookeeper_fenced":
            assert m["token_increased"] is True
    assert not list(services.tmp.glob("zookeeper-ensemble-*")), "a trial left its ensemble's data behind"
    assert not [p for p in processes_under(services.tmp) if "zookeeper-ensemble-" in p]


# --- a machine without the package ----------------------------------------------------------------------------

def test_without_zookeeper_every_cell_says_it_does_not_run_and_the_run_goes_on(tmp_path):
    """LAB_ZOOKEEPER_SEARCH_PATH empty: the lab finds no ZooKeeper, as on a machine without the package (this runs
    where it is installed too). No JVM starts, every cell of the two locks says why, the run exits 0."""
    tmp, results = shared_tmp(tmp_path), tmp_path / "r"
    hidden = {SEARCH_PATH_VARIABLE: ""}
    try:
        listed = lab("list", env=hidden)
        assert listed.returncode == 0 and all(f"! {name} " in listed.stdout for name in BACKENDS), listed.stdout
        assert MISSING in listed.stdout
        checked = lab("check-backend", "kazoo", env=hidden, tmp=tmp)
        assert checked.returncode == 1 and f"kazoo does not run against these servers: {MISSING}" in checked.stdout
        run = lab("run", "--backend", ",".join(BACKENDS), "--scenario", "pause,restart,zookeeper_partition",
                  "--profile", "quick", "--results", str(results), env=hidden, tmp=tmp)
        assert run.returncode == 0, run.stderr
        [folder] = list(results.iterdir())
        trials = read_trials(folder)
        reasons = {t["reason"] for t in trials if t["status"] == "skipped" and t.get("runs_here") is False}
        assert reasons == {f"does not run: {MISSING}"}
        assert {t["status"] for t in trials} == {"skipped"}
        ran = [t for t in trials if t.get("runs_here") is not False]
        assert all(t["variant"] == "aof_always" for t in ran)  # n/a by declaration, whatever is installed
        assert "zookeeper" not in json.loads((folder / "meta.json").read_text()).get("services", {})
        assert not [p for p in processes_under(tmp) if "java" in p]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_machine_without_zookeeper_is_one_line_for_the_lab_and_the_tests():
    assert MISSING == os_packages.not_installed("zookeeper") == "zookeeper not installed (apt-get install zookeeper)"
    assert Path("/usr/share/zookeeper/bin/zkServer.sh") in [Path(b) for b in os_packages.packages()["zookeeper"].binaries]
