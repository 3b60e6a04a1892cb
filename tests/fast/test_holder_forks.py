"""The holder fork server (lab/holder/forks.py, zygote.py): a forked holder is a process of its own
that the lab can signal, stop and wait for as it would a fresh one, and none outlives the server."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from lab.holder import forks
from lab.holder.forks import ForkServer


@pytest.fixture
def server():
    running = ForkServer()
    yield running
    running.close()


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether pid ended (or is a zombie no one has reaped yet) within the time given."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_a_forked_holder_is_the_servers_child_in_a_group_of_its_own_and_ends_when_its_stdin_closes(server):
    holder = server.fork()
    assert psutil.Process(holder.pid).ppid() == server.proc.pid
    assert os.getpgid(holder.pid) == holder.pid  # a Ctrl-C at the terminal reaches the lab, not the holder
    assert holder.poll() is None
    holder.stdin.close()  # what a holder does with no spec: it returns, as a fresh one does
    assert holder.wait(30) == 0 and holder.poll() == 0
    assert holder.stdout.read() == ""
    assert server.forked == 1


def test_a_forked_holder_stops_on_sigstop_and_a_kill_shows_in_its_return_code(server):
    holder = server.fork()
    holder.send_signal(signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while psutil.Process(holder.pid).status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
        time.sleep(0.01)
    assert psutil.Process(holder.pid).status() == psutil.STATUS_STOPPED
    with pytest.raises(Exception) as waited:
        holder.wait(0.2)
    assert type(waited.value).__name__ == "TimeoutExpired"  # subprocess's, as Popen.wait raises it
    holder.kill()
    assert holder.wait(30) == -signal.SIGKILL
    holder.kill()  # after its exit: nothing to signal, and no error


def test_closing_the_server_ends_every_holder_it_forked(server):
    holders = [server.fork() for _ in range(2)]
    server.close()
    assert all(_gone(h.pid) for h in holders)
    assert [h.wait(10) for h in holders] == [-signal.SIGKILL] * 2
    assert _gone(server.proc.pid)


def test_when_the_server_is_gone_holders_start_fresh_and_the_lab_says_so_once(capsys):
    forks.open_server()
    try:
        running = forks._server
        assert running is not None
        first = forks.fork()
        assert first is not None
        first.stdin.close()
        assert first.wait(30) == 0
        running.proc.kill()
        running.proc.wait(10)
        assert forks.fork() is None and forks.fork() is None
        said = capsys.readouterr().err
        assert said.count("holders start fresh from now on") == 1
    finally:
        forks.close_server()
    assert forks.fork() is None  # no server open: the caller starts one
