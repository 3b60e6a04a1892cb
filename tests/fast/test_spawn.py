"""Children the lab starts (lab/servers/processes.py popen) die with the lab, lead a process group of their own,
run as the user asked, and a missing or non-executable program fails as Popen's own error, not as a child that
exits 127 behind setpriv."""

import os
import subprocess
import sys
import textwrap

import pytest

from lab.servers import processes
from lab.servers.processes import popen

needs_setpriv = pytest.mark.skipif(processes.SETPRIV is None, reason="setpriv (util-linux) not found: children fork")


def test_a_child_leads_a_process_group_of_its_own():
    child = popen(["sleep", "30"])
    try:
        assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
        for _ in range(50):  # setpriv (or nsenter) runs first and execs it: the same pid
            with open(f"/proc/{child.pid}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")[:2]
            if argv == [b"sleep", b"30"]:
                break
            subprocess.run(["sleep", "0.05"])
        assert argv == [b"sleep", b"30"]
    finally:
        child.kill()
        child.wait()


def test_a_child_dies_with_the_lab_that_started_it(tmp_path):
    """A lab process starts a sleeper and is SIGKILLed, running no cleanup: the kernel ends the sleeper."""
    pid_file = tmp_path / "pid"
    lab = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from lab.servers.processes import popen
        child = popen(["sleep", "60"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(60)
        """)])
    try:
        for _ in range(100):
            if pid_file.exists() and pid_file.read_text():
                break
            subprocess.run(["sleep", "0.1"])
        sleeper = int(pid_file.read_text())
        lab.kill()
        lab.wait()
        for _ in range(50):
            state = _state(sleeper)
            if state in (None, "Z"):
                break
            subprocess.run(["sleep", "0.1"])
        assert _state(sleeper) in (None, "Z"), "the sleeper outlived the lab that started it"
    finally:
        lab.kill()


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


@pytest.mark.skipif(os.geteuid() != 0, reason="changing user takes root")
def test_a_child_runs_as_the_user_asked():
    out = popen(["id", "-u"], user="nobody", stdout=subprocess.PIPE, text=True)
    assert out.communicate(timeout=10)[0].strip() == str(65534) and out.returncode == 0


@needs_setpriv
def test_a_child_is_started_behind_setpriv_so_python_can_vfork():
    assert processes.through_setpriv(["postgres", "-D", "x"], 3, None, "pg")[:2] == [processes.SETPRIV, "--reuid=pg"]
    assert processes.through_setpriv(["x"], 9, 7, None)[1:5] == ["--net=/proc/self/fd/7", "--", processes.SETPRIV,
                                                               "--pdeathsig"]


def test_a_missing_or_non_executable_program_raises_as_popen_would(tmp_path):
    with pytest.raises(FileNotFoundError):
        popen(["locklab-no-such-program"])
    with pytest.raises(FileNotFoundError):
        popen([str(tmp_path / "absent")])
    plain = tmp_path / "plain"
    plain.write_text("")
    with pytest.raises(PermissionError):
        popen([str(plain)])
