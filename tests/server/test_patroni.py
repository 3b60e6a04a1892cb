"""PostgreSQL under Patroni, one fault event per variant: each fault on a real cluster, several locks served by one
strike, the split brain's lost acknowledged write, what survives a SIGKILL, and the line a machine without Patroni
gets.

The events of the faults run three at a time once for the module (each takes 20 to 65 s, most of it Patroni's ttl),
and each test reads its own subjects. Where a race is real the test asserts what holds either way.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from lab.runner.events import subject_record
from lab.servers.patroni.runtime import MISSING, unavailable_reason
from scenarios.events import EventEnv, EventSpec
from scenarios.patroni import Patroni
from tests.os_packages import REQUIRED, skip_for
from tests.server.helpers import alive, lock_lost, outcome_of, processes_under, shared_tmp, trial_env
from tests.server.test_cli_run import lab_env
from tests.server.test_lease_faults import no_holder_left

pytestmark = [pytest.mark.server, pytest.mark.slow]

# One event per variant, its subjects the locks its tests read. The split brain also serves the locks whose lock
# lives on the run's own Redis, etcd or ZooKeeper and whose fence and writes live in the cluster.
ELSEWHERE = ("etcd_fenced", "redis_fenced", "zookeeper_fenced", "redis", "etcd")
EVENTS = {"crash": ("session_autocommit",), "agent_paused": ("session_autocommit", *ELSEWHERE),
          "agent_paused_routed": ("xact", "lease_row"), "agent_paused_sync": ("lease_row",), "dcs_cut": ("lease_row",),
          "dcs_cut_failsafe": ("session_autocommit",), "switchover": ("lease_row",)}


@pytest.fixture(scope="module")
def patroni_here():
    """Skip (fail under LAB_REQUIRE_SYSTEM_SERVERS, where CI installs every extra) with the line a cell gives."""
    skip_for(unavailable_reason())


@pytest.fixture(scope="module")
def trials(patroni_here, services, engines):
    """Every event of EVENTS, three at a time: (backend, variant) -> (measures, outcome, record) or the exception its
    subject (or its event) raised."""
    scenario = Patroni()

    def one(variant: str) -> dict:
        names = [n for n in EVENTS[variant] if n != "zookeeper_fenced" or "zookeeper" not in services.unavailable]
        run_id = f"test-{time.monotonic_ns()}"
        envs = [trial_env(services, engines, scenario.name, name, variant, scenario.profile_params("quick"),
                          run_id=run_id) for name in names]
        event = EventSpec(scenario.name, variant, 0, tuple(env.spec for env in envs))
        try:
            outcome = scenario.run_event(EventEnv.of(event, envs))
        except Exception as exc:  # handed to every test that reads this event
            return {(name, variant): exc for name in names}
        found: dict = {}
        for subject in outcome.subjects:
            if subject.failed is not None:
                found[(subject.spec.backend, variant)] = subject.failed
                continue
            record = subject_record(scenario, subject, outcome, event, {})
            found[(subject.spec.backend, variant)] = (subject.measures, outcome_of(scenario, dict(subject.measures),
                                                                                    subject.spec.backend), record)
        return found

    with ThreadPoolExecutor(3) as pool:
        found = {key: value for event in pool.map(one, EVENTS) for key, value in event.items()}
    assert no_holder_left()
    assert not list(services.tmp.glob("patroni-*")), "an event left its cluster's data behind"
    assert not [p for p in processes_under(services.tmp) if "patroni-" in p], "an event left a process running"
    return found


def trial(trials, backend: str, variant: str):
    found = trials[(backend, variant)]
    if isinstance(found, Exception):
        raise found
    return found[:2]


def test_a_crashed_postgres_is_restarted_or_failed_over_and_its_session_lock_is_gone(trials):
    m, outcome = trial(trials, "session_autocommit", "crash")
    evidence = m["evidence"]
    assert evidence["patroni_action"] in ("restarted in place", "failed over")
    if evidence["patroni_action"] == "restarted in place":  # the agent still held the leader key
        assert evidence["new_primary"] == evidence["leader_before"] and m["promotion"]["promote_s"] is None
        assert evidence["new_postmaster"] != evidence["killed_postmaster"]
    else:
        assert m["promotion"]["promote_s"] is not None
    # An advisory lock lives in the crashed server's memory: the contender gets it, the holder writes after it.
    assert m["contender"]["acquired"] is True and lock_lost(Patroni(), m, "session_autocommit")
    assert outcome["verdict"] == "stale write accepted"
    assert m["promotion"]["manager"].startswith("patroni ")


def test_a_paused_agent_leaves_two_primaries_and_the_rewind_loses_the_acknowledged_write(trials):
    m, outcome = trial(trials, "session_autocommit", "agent_paused")
    evidence, promotion = m["evidence"], m["promotion"]
    assert evidence["agent_state"] == "T" and evidence["two_primaries"] is True
    assert promotion["promote_s"] >= m["patroni"]["ttl"]  # the leader key had to expire first
    # The old primary went on acknowledging the probe's writes until its agent demoted it; those written after the
    # promotion were rewound away.
    assert promotion["old_primary_accepting_s"] > promotion["promote_s"]
    assert promotion["old_primary_writes_survived"] < promotion["old_primary_accepted"]
    assert evidence["settled"]["old_primary_rewound"] is True
    # Clients on the multi-host URL stay with the old primary (listed first, still read-write): the contender is
    # refused there, the holder's commit there returns ok, and the company ends as the seed left it.
    assert m["contender"]["acquired"] is False and m["holder"]["write"] == "committed"
    assert m["runs_in_final"] == ["seed"]
    assert outcome["verdict"] == "acknowledged write lost" and outcome["safety"] == "unsafe"
    assert m["holder"]["signals"] == []  # nothing told the holder


def test_routed_clients_reach_the_new_primary_and_a_lock_inside_the_write_loses_its_acknowledged_commit(trials):
    m, outcome = trial(trials, "xact", "agent_paused_routed")
    new = m["evidence"]["router"]["ports"][m["evidence"]["new_primary"]]
    assert new in m["evidence"]["router"]["routed"]  # the health check sent the contender to the new primary
    assert m["contender"]["write"] == "committed" and m["holder"]["write"] == "committed"
    assert m["runs_in_final"] == ["contender"]
    assert outcome["verdict"] == "acknowledged write lost"


def test_routed_clients_send_the_fenced_holders_write_to_the_new_primary_whose_fence_refuses_it(trials):
    m, outcome = trial(trials, "lease_row", "agent_paused_routed")
    assert m["contender"]["acquired"] is True and m["holder"]["write"] == "rejected"
    assert m["runs_in_final"] == ["contender"]
    findings = {f["checker"]: f["valid"] for f in outcome["judgement"]["findings"]}
    assert findings["acknowledged writes"] == "true"
    # Its release goes to the old primary, where its lease row still is: whether that lands before the demotion
    # is a race, and a success there is a false release.
    assert outcome["verdict"] in ("stale write rejected", "false release")


def test_under_synchronous_mode_the_old_primary_acknowledges_nothing_it_loses(trials):
    m, outcome = trial(trials, "lease_row", "agent_paused_sync")
    promotion = m["promotion"]
    assert m["evidence"]["two_primaries"] is True
    assert promotion["old_primary_writes_survived"] == promotion["old_primary_accepted"]
    assert promotion["old_primary_accepting_s"] is None or promotion["old_primary_accepting_s"] < promotion["promote_s"] + 1
    assert m["holder"]["write"] != "committed"  # its commit waited on a standby that had become a primary
    assert outcome["safety"] != "unsafe"


def test_a_primary_cut_from_etcd_demotes_itself_before_the_replica_is_promoted(trials):
    m, outcome = trial(trials, "lease_row", "dcs_cut")
    evidence, promotion = m["evidence"], m["promotion"]
    assert evidence["patroni_action"] == "failed over" and evidence["old_primary_demoted"] is True
    assert evidence["dcs_bytes_during_cut"] == 0 and evidence["dcs_last_seen_s_ago"] > m["patroni"]["retry_timeout"]
    assert promotion["old_primary_accepting_s"] < promotion["promote_s"]  # never two primaries
    assert promotion["old_primary_writes_survived"] == promotion["old_primary_accepted"]
    assert outcome["safety"] == "safe"


def test_with_failsafe_mode_a_primary_cut_from_etcd_stays_primary(trials):
    m, outcome = trial(trials, "session_autocommit", "dcs_cut_failsafe")
    assert m["evidence"]["patroni_action"] == "kept the primary" and m["evidence"]["new_primary"] is None
    assert m["evidence"]["failsafe_mode_is_active"] is True
    assert m["promotion"]["promote_s"] is None
    assert m["promotion"]["old_primary_writes_survived"] == m["promotion"]["old_primary_accepted"] > 0
    assert outcome["verdict"] == "held"


def test_a_planned_switchover_loses_nothing_the_old_primary_acknowledged(trials):
    m, outcome = trial(trials, "lease_row", "switchover")
    promotion = m["promotion"]
    assert m["evidence"]["switchover"]["status"] == 200 and promotion["promote_s"] < 15
    assert promotion["old_primary_writes_survived"] == promotion["old_primary_accepted"]
    assert outcome["safety"] == "safe"


def test_one_split_brain_also_serves_the_locks_held_elsewhere_but_fenced_and_written_in_the_cluster(trials,
                                                                                                   services):
    confirmed = []
    for name in ELSEWHERE:
        if name == "zookeeper_fenced" and "zookeeper" in services.unavailable:
            continue
        found = trials[(name, "agent_paused")]
        if isinstance(found, Exception):
            raise found
        measures, outcome, record = found
        assert record["status"] == "ok" and outcome["verdict"]  # judged, not an error
        assert measures["evidence"]["agent_state"] == "T"
        confirmed.append(record["event"]["confirmed"])
    session = trials[("session_autocommit", "agent_paused")][2]
    assert all(c == session["event"]["confirmed"] for c in confirmed)  # one strike, one confirmation for all
    assert session["event"]["subjects"] >= len(confirmed) + 1


def test_postgres_outlives_a_killed_agent_under_its_keeper_and_stop_ends_it(patroni_here, services):
    """Patroni disowns the postgres it starts: a SIGKILL of the agent leaves it running, re-parented to the keeper
    (without one, to init), and the cluster's stop still ends it."""
    from lab.servers.patroni.cluster import PatroniCluster, PatroniSettings
    from lab.servers.patroni.runtime import runtime

    root = services.tmp / "patroni-agent-kill"
    root.mkdir()
    root.chmod(0o755)
    cluster = PatroniCluster(root, services.embedded["postgres"].bin, runtime(), PatroniSettings())
    try:
        cluster.start()
        node = cluster.nodes[0]
        postmaster, agent = node.postmaster_pid, node.patroni_pid
        assert postmaster is not None and agent is not None
        assert psutil.Process(postmaster).ppid() == node.keeper.pid  # adopted, not the agent's child
        os.kill(agent, signal.SIGKILL)
        psutil.Process(agent).wait(10) if psutil.pid_exists(agent) else None
        time.sleep(0.5)
        assert alive(postmaster)
        assert cluster.server_state(node).get("in_recovery") is False  # still serving, now without an agent
        pids = cluster.pids
        secrets = [cluster.secrets.superuser, cluster.secrets.replication, cluster.secrets.rest]
        commands = [" ".join(psutil.Process(p).cmdline()) for p in pids if psutil.pid_exists(p)]
        assert not [c for c in commands if any(secret in c for secret in secrets)]  # `ps` shows every user these
    finally:
        cluster.stop()
        logs = [n.log_path.read_text(errors="replace") for n in cluster.nodes if n.log_path.exists()]
        shutil.rmtree(root, ignore_errors=True)
    assert logs and not [log for log in logs if any(secret in log for secret in secrets)]
    deadline = time.monotonic() + 10
    while [p for p in pids if psutil.pid_exists(p)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if alive(p)]


def test_a_killed_lab_leaves_no_patroni_postgres_or_etcd_and_the_next_run_removes_its_temp_dir(patroni_here, tmp_path):
    tmp = shared_tmp(tmp_path)
    try:
        cmd = [sys.executable, "-m", "lab.cli", "run", "--backend", "session_autocommit", "--scenario", "patroni",
               "--profile", "quick", "--results", str(tmp_path / "r")]
        child = subprocess.Popen(cmd, cwd=tmp_path, env=lab_env(tmp), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        kinds = set()
        while time.monotonic() < deadline and not {"patroni", "postgres", "etcd"} <= kinds:
            kinds = {k for p in processes_under(tmp) for k in ("patroni", "postgres", "etcd") if k in p}
            time.sleep(0.5)
        assert {"patroni", "postgres", "etcd"} <= kinds, kinds  # a cluster was up mid-scenario
        (lab_dir,) = tmp.glob("locklab-*")
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        deadline = time.monotonic() + 20
        while processes_under(tmp) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert processes_under(tmp) == []
        assert lab_dir.is_dir()  # files cannot outlive a SIGKILL's lack of cleanup: the next run removes them
        again = subprocess.run([sys.executable, "-m", "lab.cli", "run", "--backend", "none", "--scenario", "overlap",
                                "--profile", "quick", "--results", str(tmp_path / "r")], cwd=tmp_path,
                               env=lab_env(tmp), capture_output=True, text=True, timeout=180)
        assert again.returncode == 0, again.stderr
        assert str(lab_dir) in again.stdout + again.stderr and not lab_dir.exists()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="hiding the installed package needs root and unshare (a private mount namespace)")
def test_without_patroni_every_cell_says_does_not_run_with_the_install_line(patroni_here, tmp_path):
    """The machine without the `ha` extra, for real: an empty folder mounted over the installed package, in a mount
    namespace of this test's own. Every cell of the scenario says why, and this module's tests skip with that line."""
    import importlib.util

    package = Path(importlib.util.find_spec("patroni").origin).parent
    empty = tmp_path / "empty"
    empty.mkdir()
    tmp = shared_tmp(tmp_path)
    results = tmp_path / "r"

    def hidden(*argv: str) -> subprocess.CompletedProcess:
        script = f"mount --bind {empty} {package} && exec \"$@\""
        env = {k: v for k, v in lab_env(tmp).items() if k != REQUIRED}  # here, missing is the point
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *argv],
                              cwd=Path(__file__).parents[2], env=env, capture_output=True, text=True, timeout=300)

    try:
        run = hidden(sys.executable, "-m", "lab.cli", "run", "--backend", "session,lease_row", "--scenario", "patroni",
                     "--profile", "quick", "--results", str(results))
        assert run.returncode == 0, run.stderr
        (folder,) = results.iterdir()
        trials = [json.loads(line) for line in (folder / "trials.jsonl").read_text().splitlines()]
        assert len(trials) == 2 * len(Patroni.columns)  # every subject of every event: one record each
        assert {(t["status"], t["reason"], t["runs_here"]) for t in trials} == {
            ("skipped", f"does not run: {MISSING}", False)}
        tests = hidden(sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-m", "slow", __file__,
                       "-k", "keeper")  # -m slow: this file is in the slow tier, which a bare pytest leaves out
        skipped = [line for line in tests.stdout.splitlines() if line.startswith("SKIPPED")]
        assert tests.returncode == 0 and len(skipped) == 1 and skipped[0].endswith(MISSING), tests.stdout[-2000:]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="the server's own user exists only when the lab runs as root")
def test_a_venv_other_users_cannot_enter_gives_patroni_a_copy_it_can_read(patroni_here, monkeypatch):
    """A checkout under /root: the lab copies what Patroni needs where the server's user can read it, and that user's
    interpreter imports Patroni and psycopg2 from the copy (the check runtime() makes, as that user)."""
    from lab.servers.patroni import runtime as patroni_runtime

    monkeypatch.setattr(patroni_runtime, "traversable_by_others", lambda path: False)
    patroni_runtime.runtime.cache_clear()
    try:
        found = patroni_runtime.runtime()
    finally:
        patroni_runtime.runtime.cache_clear()
    [copy] = found.site_dirs
    assert copy.startswith(("/tmp/", os.environ.get("TMPDIR", "/tmp"))) and (Path(copy) / "patroni").is_dir()
    assert found.user == "embedded_postgres" and found.version
