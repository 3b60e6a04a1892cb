"""SIGKILL of `lab run` in the middle of the sentinel scenario: every Redis server, Sentinel, PostgreSQL and holder it
started dies with it (the kernel's parent-death signal, processes.spawn), and the next lab removes its temp dir."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.server.helpers import shared_tmp

pytestmark = pytest.mark.server


def sentinels_under(folder: Path) -> list[psutil.Process]:
    """Sentinels whose working directory lies under folder (redis-server rewrites its command line to
    "redis-server 127.0.0.1:PORT [sentinel]")."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "[sentinel]" in cmdline and (proc.info["cwd"] or "").startswith(str(folder)):
            found.append(proc)
    return found


def test_a_killed_run_takes_its_sentinels_servers_and_holders_with_it(tmp_path):
    tmp = shared_tmp(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
    env["TMPDIR"] = str(tmp)
    lab = subprocess.Popen([sys.executable, "-m", "lab.cli", "run", "--profile", "quick", "--scenario", "sentinel",
                            "--backend", "redis,redis_fenced", "--results", str(tmp_path / "r")], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(sentinels_under(tmp)) < 3:  # a trial's Sentinels are up: its servers and holder with them
            assert lab.poll() is None and time.monotonic() < deadline, "the run never started a trial's Sentinels"
            time.sleep(0.2)
        time.sleep(3.0)  # into the trial: the holder holds, the fault may be striking
        children = psutil.Process(lab.pid).children(recursive=True)
        names = {" ".join(c.cmdline()[:1]) for c in children if c.is_running()}
        assert any("redis-server" in n for n in names) and any("postgres" in n for n in names), names
        lab.send_signal(signal.SIGKILL)
        lab.wait(10)
        deadline = time.monotonic() + 20
        alive = children
        while alive and time.monotonic() < deadline:
            alive = [c for c in alive if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
            time.sleep(0.1)
        assert alive == [], [" ".join(c.cmdline()) for c in alive]
        left = sorted(tmp.glob("locklab-*"))
        assert len(left) == 1  # its temp dir stays behind a SIGKILL; the next lab removes it and says so
        sweep = ("from lab.servers.services import start_services\n"
                 "with start_services(['redis']) as s: print('\\n'.join(s.swept))\n")
        swept = subprocess.run([sys.executable, "-c", sweep], env=env, capture_output=True, text=True, timeout=120,
                               check=True).stdout
        assert str(left[0]) in swept and not left[0].exists()
    finally:
        if lab.poll() is None:
            lab.kill()
        shutil.rmtree(tmp, ignore_errors=True)
