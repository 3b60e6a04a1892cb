"""SIGKILL of `lab run` in the middle of a clock or a slow-network trial: no server is left running on a fake clock
(libfaketime preloaded) and no private network namespace is left behind (nothing keeps one once the lab and its
children are gone), and the next lab removes the run's temp dir."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from tests.server.helpers import killed_mid_trial

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


@pytest.mark.os_packages("libfaketime")
def test_a_killed_clock_run_leaves_no_server_on_a_fake_clock(tmp_path):
    before = set(fake_clocked())

    def clocked(children: list[psutil.Process]) -> list[int]:
        return [pid for pid in fake_clocked() if pid in {c.pid for c in children}]

    struck = killed_mid_trial(tmp_path, "server_clock", "redis_fenced", clocked)
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

    namespaces = killed_mid_trial(tmp_path, "slow_network", "redis_fenced", inside)
    assert namespaces  # the trial's servers ran in a namespace of their own while the lab lived
    assert not (set(net_namespaces()) - before), "a network namespace outlived the lab"
