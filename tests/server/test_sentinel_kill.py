"""SIGKILL of `lab run` in the middle of the sentinel scenario: every Redis server, Sentinel, PostgreSQL and holder it
started dies with it (the kernel's parent-death signal, processes.spawn), and the next lab removes its temp dir."""

from __future__ import annotations

import psutil
import pytest

from tests.server.helpers import killed_mid_trial

pytestmark = pytest.mark.server


def command_lines(children: list[psutil.Process]) -> list[str]:
    """The running children's command lines (redis-server rewrites its own to "redis-server 127.0.0.1:PORT [sentinel]")."""
    lines = []
    for child in children:
        try:
            lines.append(" ".join(child.cmdline()))
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return lines


def test_a_killed_run_takes_its_sentinels_servers_and_holders_with_it(tmp_path):
    def sentinels_up(children: list[psutil.Process]) -> bool:
        """A trial's three Sentinels are up: its servers and holder with them."""
        return sum("[sentinel]" in line for line in command_lines(children)) >= 3

    def redis_and_postgres(children: list[psutil.Process]) -> None:
        lines = command_lines(children)
        assert any("redis-server" in n for n in lines) and any("postgres" in n for n in lines), lines

    killed_mid_trial(tmp_path, "sentinel", "redis,redis_fenced", sentinels_up, into_trial_s=3.0,
                     before_kill=redis_and_postgres)
