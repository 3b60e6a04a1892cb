"""SIGKILL of `lab run` in the middle of a clock or a slow-network trial: no server is left running on a fake clock
(libfaketime preloaded) and no private network namespace is left behind (nothing keeps one once the lab and its
children are gone), and the next lab removes the run's temp dir."""

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


def fake_clocked() -> list[int]:
    """Every process with libfaketime loaded (its memory map says so: Redis rewrites its process title over the
    memory /proc/PID/environ reads, so its environment no longer shows the preload)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if "libfaketime" in (entry / "maps").read_text():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def net_namespaces() -> dict[str, int]:
    """Each network namespace some process is in, with one such process."""
    seen: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                seen.setdefault(os.readlink(entry / "ns" / "net"), int(entry.name))
            except OSError:
                continue
    return seen


def killed_mid_trial(tmp_path: Path, scenario: str, backend: str, started) -> tuple[list[psutil.Process], dict]:
    """Run `lab run --scenario SCENARIO`, SIGKILL it once started(lab_children) is true and a second has passed; the
    children it had and what started() returned."""
    tmp = shared_tmp(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
    env["TMPDIR"] = str(tmp)
    lab = subprocess.Popen([sys.executable, "-m", "lab.cli", "run", "--profile", "quick", "--scenario", scenario,
                            "--backend", backend, "--results", str(tmp_path / "r")], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (seen := started(psutil.Process(lab.pid).children(recursive=True))):
            assert lab.poll() is None and time.monotonic() < deadline, f"the run never started a {scenario} trial"
            time.sleep(0.1)
        time.sleep(1.0)  # into the trial: the holder holds, the fault may be striking
        children = psutil.Process(lab.pid).children(recursive=True)
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
        return children, seen
    finally:
        if lab.poll() is None:
            lab.kill()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.os_packages("libfaketime")
def test_a_killed_clock_run_leaves_no_server_on_a_fake_clock(tmp_path):
    before = set(fake_clocked())

    def clocked(children: list[psutil.Process]) -> list[int]:
        return [pid for pid in fake_clocked() if pid in {c.pid for c in children}]

    _, struck = killed_mid_trial(tmp_path, "server_clock", "redis_fenced", clocked)
    assert struck  # a server ran on a fake clock while the lab lived
    assert set(fake_clocked()) <= before


@pytest.mark.os_packages("iproute2", "iptables", root=True)
def test_a_killed_slow_network_run_leaves_no_network_namespace(tmp_path):
    ours = os.readlink("/proc/self/ns/net")
    before = set(net_namespaces())

    def inside(children: list[psutil.Process]) -> set[str]:
        spaces = set()
        for child in children:
            try:
                spaces.add(os.readlink(f"/proc/{child.pid}/ns/net"))
            except OSError:
                continue
        return spaces - {ours}

    _, namespaces = killed_mid_trial(tmp_path, "slow_network", "redis_fenced", inside)
    assert namespaces  # the trial's servers ran in a namespace of their own while the lab lived
    assert not (set(net_namespaces()) - before), "a network namespace outlived the lab"
