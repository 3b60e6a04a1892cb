"""A temp dir's owner: alive while its process runs, whatever the wall clock does; dead once it exits."""

import os
import subprocess
import sys

import psutil._pslinux

from lab.servers.owner import OWNER_FILE, mark_owner, owner_alive, start_ticks
from lab.servers.services import sweep_abandoned


def exited_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


def test_a_folder_marked_by_this_process_is_alive(tmp_path):
    mark_owner(tmp_path)
    assert owner_alive(tmp_path)


def test_a_step_of_the_wall_clock_does_not_make_a_live_owner_look_dead(tmp_path, monkeypatch):
    """The kernel's boot time in seconds since the epoch moves when the clock is stepped or slewed across a second.
    A mark in epoch seconds then no longer matched its live process, and a sweep removed a running server's data."""
    mark_owner(tmp_path)
    booted = psutil._pslinux.boot_time()
    monkeypatch.setattr(psutil._pslinux, "boot_time", lambda: booted + 1.0)
    assert owner_alive(tmp_path)


def test_an_exited_owner_and_a_reused_pid_are_dead(tmp_path):
    (tmp_path / OWNER_FILE).write_text(f"{exited_pid()} 12345\n")
    assert not owner_alive(tmp_path)
    (tmp_path / OWNER_FILE).write_text(f"{os.getpid()} {start_ticks(os.getpid()) + 1}\n")  # our pid, not our start
    assert not owner_alive(tmp_path)


def test_an_older_labs_mark_in_epoch_seconds_goes_by_its_pid(tmp_path):
    (tmp_path / OWNER_FILE).write_text(f"{os.getpid()} 1796299738.33\n")
    assert owner_alive(tmp_path)
    (tmp_path / OWNER_FILE).write_text(f"{exited_pid()} 1796299738.33\n")
    assert not owner_alive(tmp_path)


def test_a_mark_that_cannot_be_read_is_kept(tmp_path):
    """An empty mark is what a lab starting this moment has written so far: its folder is not abandoned."""
    (tmp_path / OWNER_FILE).write_text("")
    assert owner_alive(tmp_path)


def test_a_sweep_removes_the_dead_owners_folder_and_keeps_the_live_ones(tmp_path):
    dead, live = tmp_path / "locklab-dead", tmp_path / "locklab-live"
    dead.mkdir()
    live.mkdir()
    (dead / OWNER_FILE).write_text(f"{exited_pid()} 12345\n")
    mark_owner(live)
    removed = sweep_abandoned(tmp_path)
    assert not dead.exists() and live.exists()
    assert len(removed) == 1 and str(dead) in removed[0]
