"""Your own cluster manager on PostgreSQL: `--fault-command failover=CMD, pause=CMD, partition=CMD, heal=CMD` drive a
Patroni cluster the lab did not start (here the lab's own cluster module, started by the test), through shell commands
a user would write: `patronictl -c patroni.yml switchover --force`; `kill -STOP` of the leader's agent, found from
Patroni's REST API (GET /cluster names the leader's api_url) and the process listening there (`ss`), and `kill -CONT`;
for the partition a trigger file that the test turns into a real cut (the leader's link to etcd blackholed by its
proxy). The lab reaches the cluster by LAB_PG_DSN, a multi-host URL with target_session_attrs=read-write, so no password
is in any argv.

One run of the patroni scenario with every hook, two backends: the trials go one at a time, each on the cluster the
previous one left (so the leader moves from trial to trial). About two minutes here, most of it Patroni's ttl (20 s).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from lab.servers.patroni.cluster import PatroniCluster, PatroniSettings
from lab.servers.patroni.runtime import unavailable_reason
from lab.servers.postgres.server import EmbeddedPostgres
from tests.os_packages import skip_for
from tests.server.helpers import processes_under, shared_tmp
from tests.server.hook_helpers import hooked_lab_run, started_with, trigger_hooks

pytestmark = [pytest.mark.server, pytest.mark.slow]

BACKENDS = ("lease_row", "session")
HOOKED = {"agent_paused": "pause", "dcs_cut": "partition", "switchover": "failover"}


class Partitioner(threading.Thread):
    """What the user's partition and heal commands do, made real: while the trigger file exists, the leader of the
    moment is cut from etcd (its agent's link blackholed; its postgres and its clients untouched)."""

    def __init__(self, cluster: PatroniCluster, trigger: Path):
        super().__init__(daemon=True)
        self.cluster, self.trigger, self.done = cluster, trigger, threading.Event()
        self.cut: list[str] = []
        self.link = None

    def run(self) -> None:
        while not self.done.wait(0.05):
            if self.trigger.exists() and self.link is None:
                leader = self.cluster.leader()
                if leader is not None and leader.dcs_link is not None:
                    self.link = leader.dcs_link
                    self.link.blackhole()
                    self.cut.append(leader.name)
            elif not self.trigger.exists() and self.link is not None:
                self.link.restore()
                self.link = None


@pytest.fixture(scope="module")
def your_patroni():
    """A Patroni cluster of two nodes and its etcd, started as a user's would be; skipped (failed under
    LAB_REQUIRE_SYSTEM_SERVERS) with the line a cell gives where Patroni cannot run."""
    skip_for(unavailable_reason())
    from lab.servers.patroni.runtime import runtime

    folder = shared_tmp(Path(tempfile.gettempdir()))
    (folder / "cluster").mkdir(mode=0o755)
    cluster = PatroniCluster(folder / "cluster", EmbeddedPostgres(folder / "binaries").bin, runtime(),
                             PatroniSettings())
    partitioner = Partitioner(cluster, folder / "partition")
    with started_with(cluster, partitioner, folder):
        yield cluster, folder, partitioner
    assert not processes_under(folder), "the cluster left a process running"


def commands(cluster: PatroniCluster, folder: Path) -> dict[str, str]:
    """The hooks as a user writes them: patronictl with a node's own configuration, and the leader's agent found from
    the REST API (any member's GET /cluster) and the process that listens on its port."""
    config = cluster.nodes[-1].config_path
    ctl = Path(sys.executable).with_name("patronictl")
    api = f"http://127.0.0.1:{cluster.nodes[-1].rest_port}/cluster"
    leader_api = ("python3 -c 'import json, sys; print(next(m[\"api_url\"] for m in json.load(sys.stdin)[\"members\"] "
                  "if m[\"role\"] == \"leader\").split(\":\")[2].split(\"/\")[0])'")
    agent = f"$(ss -Hltnp \"sport = :$(curl -s {api} | {leader_api})\" | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)"
    return {
        "failover": f"{ctl} -c {config} switchover --force",
        "pause": f"pid={agent}; [ -n \"$pid\" ] && echo $pid > {folder}/paused && kill -STOP $pid",
        **trigger_hooks(folder),
    }


def dsn(cluster: PatroniCluster) -> str:
    """The URL a Patroni user gives libpq: every node, and the one that takes writes."""
    hosts = "&".join(f"host=127.0.0.1:{node.port}" for node in cluster.nodes)
    return f"postgresql://postgres:{cluster.secrets.superuser}@/postgres?{hosts}&target_session_attrs=read-write"


def lab_run(tmp_path: Path, cluster: PatroniCluster, hooks: dict[str, str], *args: str,
            wrapper: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`lab run --scenario patroni` on the cluster, its DSN in LAB_PG_DSN; wrapper: what runs the lab (a namespace)."""
    return hooked_lab_run(tmp_path, "patroni", {"LAB_PG_DSN": dsn(cluster)}, cluster.secrets.superuser, hooks, *args,
                          timeout=600, wrapper=wrapper, cwd=Path(__file__).parents[2])


def trials_of(tmp_path: Path) -> tuple[Path, list[dict]]:
    [run] = (tmp_path / "r").iterdir()
    return run, [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]


# The pause command finds the leader's agent as a user would, with iproute2's `ss`: without it the test skips
# with that install line (a fresh machine without the package failed here with `ss: Permission denied`).
@pytest.mark.os_packages("iproute2")
def test_your_commands_fail_over_your_patroni(your_patroni, tmp_path):
    cluster, folder, partitioner = your_patroni
    hooks = commands(cluster, folder)
    result = lab_run(tmp_path, cluster, hooks, "--backend", ",".join(BACKENDS))
    assert result.returncode == 0, result.stderr[-2000:]
    run, trials = trials_of(tmp_path)
    ran = {(t["backend"], t["variant"]): t for t in trials if t["variant"] in HOOKED}
    assert set(ran) == {(b, v) for b in BACKENDS for v in HOOKED}
    for (backend, variant), trial in ran.items():
        assert trial["status"] == "ok", (backend, variant, trial.get("reason"))
        hook, m = HOOKED[variant], trial["measures"]
        e = m["evidence"]
        assert e["hook"] == hook and e["command"] == hooks[hook] and e["command_exit"] == 0
        before, after = e["primary_before"], e["primary_after"]
        assert before["address"] != after["address"] and after["timeline"] > before["timeline"]
        assert e["standbys_replayed_s"] is not None  # the grant was on the standby before the command
        if hook == "failover":  # a switchover demotes the old primary first: never two primaries, nothing lost
            assert after["primaries"] == [after["address"]]
            assert m["promotion"]["old_primary_writes_survived"] == m["promotion"]["old_primary_accepted"]
        else:  # your heal ran; the old primary came back as a standby (rewound), beside one primary
            assert e["heal_command"] == hooks["heal"] and e["heal_command_exit"] == 0
            assert e["old_primary_after_heal"]["in_recovery"] is True
            assert e["primary_after_heal"]["primaries"] == [e["primary_after_heal"]["address"]]
        promotion = m["promotion"]
        assert promotion["manager"] == f"your cluster manager ({hook} command)"
        assert promotion["promote_s"] is not None and promotion["old_primary_accepted"] >= 0, (
            backend, variant, e.get("probe"), e.get("new_primary_after_s"))
        assert trial["verdict"] and trial["judgement"]["findings"]  # the checkers' verdict
        if backend == "lease_row":  # the fence must never accept a stale write, on your servers as on the lab's
            assert trial["verdict"] != "stale write accepted"
    for backend in BACKENDS:  # a paused agent: two primaries until it is healed
        paused = ran[(backend, "agent_paused")]["measures"]["evidence"]
        assert len(paused["primary_after"]["primaries"]) == 2
        assert ran[(backend, "agent_paused")]["measures"]["promotion"]["promote_s"] >= cluster.settings.ttl
    assert len(partitioner.cut) == len(BACKENDS)
    assert not (folder / "partition").exists() and not (folder / "paused").exists()  # healed
    reasons = {t["variant"]: t.get("reason") for t in trials if t["variant"] not in HOOKED}
    assert set(reasons) == {"crash", "agent_paused_routed", "agent_paused_sync", "dcs_cut_failsafe"}
    assert "synchronous_mode" in reasons["agent_paused_sync"] and "restart=CMD" in reasons["crash"]
    written = (run / "meta.json").read_text() + (run / "trials.jsonl").read_text() + result.stdout + result.stderr
    assert cluster.secrets.superuser not in written


def test_without_your_commands_the_cells_say_how_to_give_them(your_patroni, tmp_path):
    cluster, _, _ = your_patroni
    result = lab_run(tmp_path, cluster, {}, "--backend", "lease_row")
    assert result.returncode == 0, result.stderr[-2000:]
    _, trials = trials_of(tmp_path)
    reasons = {t["variant"]: t.get("reason") for t in trials}
    assert reasons["switchover"] == ("not run: on servers the lab did not start it runs your command: give "
                                     "--fault-command failover=CMD")
    assert "--fault-command pause=CMD and --fault-command heal=CMD" in reasons["agent_paused"]
    assert "--fault-command partition=CMD and --fault-command heal=CMD" in reasons["dcs_cut"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="hiding the installed package needs root and unshare (a private mount namespace)")
def test_on_your_cluster_the_lab_needs_no_patroni_of_its_own(your_patroni, tmp_path):
    """The lab without the `ha` extra, for real (an empty folder mounted over the package in a mount namespace of
    this test's own): against your cluster its cells still run your commands, here asking for them (*not run* until
    given: the lab never acts on your cluster by itself), and none says *does not run*."""
    import importlib.util

    cluster, _, _ = your_patroni
    package = Path(importlib.util.find_spec("patroni").origin).parent
    empty = tmp_path / "empty"
    empty.mkdir()
    hide = ("unshare", "--mount", "--propagation", "private", "sh", "-c", f"mount --bind {empty} {package} && "
            "exec \"$@\"", "sh")
    result = lab_run(tmp_path, cluster, {}, "--backend", "lease_row", wrapper=hide)
    assert result.returncode == 0, result.stderr[-2000:]
    _, trials = trials_of(tmp_path)
    assert trials and all(t["status"] == "skipped" and t["skip"] == "not run" for t in trials)
    assert "--fault-command failover=CMD" in {t["variant"]: t["reason"] for t in trials}["switchover"]
