"""Small helpers for server tests: trial environments and waiting on real server state."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from lab.servers.postgres import sql as pg
from lab.workload.table import CompanyTable, table_name
from scenarios.base import TrialEnv, TrialSpec


def trial_env(services, engines, scenario, backend, variant, params, index=0, run_id=None) -> TrialEnv:
    """A trial environment; each call gets its own run id (so its own keys and tables) unless given one."""
    monitor, writes = engines
    spec = TrialSpec(scenario, backend, variant, index)
    return TrialEnv(services, monitor, writes, run_id or f"test-{time.monotonic_ns()}", spec, params)


def verdict_of(scenario, measures: dict, backend: str) -> str:
    """A trial's verdict words as a run records them: from the checkers where the scenario records a history."""
    import backends
    from lab.runner import outcome_fields

    return outcome_fields(scenario, dict(measures), backends.load(backend))["verdict"]


def outcome_of(scenario, measures: dict, backend: str) -> dict:
    """verdict, safety, exercised and (for a judged scenario) the typed judgement, as a run records them."""
    import backends
    from lab.runner import outcome_fields

    return outcome_fields(scenario, dict(measures), backends.load(backend))


def lock_lost(scenario, measures: dict, backend: str) -> bool:
    """Whether the checkers found the lock two-held: another run granted while the holder still believed it held."""
    return outcome_of(scenario, measures, backend)["judgement"]["lock"] == "false"


def seeded_table(engines, label: str, company: int = 1, rows: int = 250) -> CompanyTable:
    """A fresh company_rows table of the test's own, with one company already built."""
    monitor, writes = engines
    table = CompanyTable(table_name(label))
    table.create(monitor)
    table.seed(writes, company, rows)
    return table


def wait_session_gone(monitor, pid: int, within: float = 10.0) -> float:
    """Seconds until the server ended session pid; fails after `within`."""
    waited = pg.wait_gone(monitor, pid, within)
    assert waited is not None, f"session {pid} still alive after {within}s"
    return waited


def shared_tmp(tmp_path: Path) -> Path:
    """A TMPDIR for a lab subprocess that the unprivileged PostgreSQL user can traverse.

    pytest's own tmp_path sits under a 0700 folder; the lab would fall back to /tmp and
    the leak checks would look in the wrong place.
    """
    folder = Path(tempfile.mkdtemp(prefix="locklab-test-", dir="/tmp"))
    folder.chmod(0o755)
    return folder


def processes_under(folder: Path) -> list[str]:
    """Live processes whose command line or working directory lies under folder."""
    found, root = [], str(folder)
    for proc in psutil.process_iter(["pid", "cmdline", "cwd", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.info["pid"] == os.getpid():
                continue
            cmdline = " ".join(proc.info["cmdline"] or [])
            if root in cmdline or (proc.info["cwd"] or "").startswith(root):
                found.append(f"{proc.info['pid']} {cmdline}")
        except psutil.Error:
            continue
    return found


def no_holder_left() -> bool:
    """No holder process still runs. One that has exited but is not reaped yet (a zombie, for an instant) is not
    running, and psutil refuses to read its command line: that is no holder left either."""
    left = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "lab.holder.process" in " ".join(child.cmdline()):
                left.append(child.pid)
        except psutil.Error:
            continue
    return not left


def assert_trial_left_nothing(services, prefix: str) -> None:
    """No holder still runs, and nothing under the lab's temp dir, file or process, is named for the trial's own
    servers (their folders start with prefix)."""
    assert no_holder_left()
    assert not list(services.tmp.glob(f"{prefix}*")), f"a trial left its servers' files ({prefix}*) behind"
    assert not [p for p in processes_under(services.tmp) if prefix in p], "a trial left a server running"


def quick_trial(services, engines, scenario, backend: str, variant: str, prefix: str) -> tuple[dict, str]:
    """One trial of scenario at its quick profile, checked to leave nothing named prefix behind: its measures and
    its verdict."""
    env = trial_env(services, engines, scenario.name, backend, variant, scenario.profile_params("quick"))
    measures = scenario.run_trial(env)
    assert_trial_left_nothing(services, prefix)
    return measures, verdict_of(scenario, measures, backend)


def alive(pid: int | psutil.Process) -> bool:
    """A live, non-zombie process (no race between looking it up and reading its status: one that ends
    in between is not alive)."""
    try:
        proc = pid if isinstance(pid, psutil.Process) else psutil.Process(pid)
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def lab_holding(names: list[str]) -> tuple[subprocess.Popen, list[int], str]:
    """A python child that starts the named embedded servers, as a lab does, and sleeps: the child, the pids of the
    servers it started and its temp dir."""
    script = ("from lab.servers.services import start_services; import time\n"
              f"s = start_services({names!r})\n"
              "print(' '.join(str(p) for x in s.embedded.values() for p in x.pids), flush=True)\n"
              "print(s.tmp, flush=True)\n"
              "time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    pids = [int(p) for p in child.stdout.readline().split()]
    return child, pids, child.stdout.readline().strip()


def sigkill_and_outlived(child: subprocess.Popen, processes: list, within: float) -> list:
    """SIGKILL child (no cleanup handler of its runs), then wait up to `within` seconds for processes (pids or
    psutil.Process) to end: those still alive then."""
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    deadline = time.monotonic() + within
    left = list(processes)
    while left and time.monotonic() < deadline:
        left = [p for p in left if alive(p)]
        time.sleep(0.1)
    return left


def assert_next_lab_sweeps(left_behind: str) -> None:
    """A killed lab's temp dir stays behind; the next lab to start embedded servers removes it, says so, and keeps
    its own. Removed here whatever happens."""
    from lab.servers.services import start_services

    try:
        with start_services(["redis"]) as again:
            assert [entry.split(" (")[0] for entry in again.swept] == [left_behind]
            assert not Path(left_behind).exists()
            assert again.tmp.exists()  # its own, which a sweep must never take
    finally:
        shutil.rmtree(left_behind, ignore_errors=True)


def killed_mid_trial(tmp_path: Path, scenario: str, backend: str, started, into_trial_s: float = 1.0,
                     before_kill=None):
    """Run `lab run --scenario SCENARIO --backend BACKEND --profile quick`, SIGKILL it once started(children) is
    truthy and into_trial_s more have passed (before_kill(children) may look at them first), then check that every
    child it had died with it and that the next lab sweeps the temp dir a SIGKILL leaves. Returns what started()
    returned."""
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
        time.sleep(into_trial_s)  # into the trial: the holder holds, the fault may be striking
        children = psutil.Process(lab.pid).children(recursive=True)
        if before_kill is not None:
            before_kill(children)
        left_running = sigkill_and_outlived(lab, children, within=20)
        assert left_running == [], [" ".join(c.cmdline()) for c in left_running]
        left = sorted(tmp.glob("locklab-*"))
        assert len(left) == 1  # its temp dir stays behind a SIGKILL; the next lab removes it and says so
        sweep = ("from lab.servers.services import start_services\n"
                 "with start_services(['redis']) as s: print('\\n'.join(s.swept))\n")
        swept = subprocess.run([sys.executable, "-c", sweep], env=env, capture_output=True, text=True, timeout=120,
                               check=True).stdout
        assert str(left[0]) in swept and not left[0].exists()
        return seen
    finally:
        if lab.poll() is None:
            lab.kill()
        shutil.rmtree(tmp, ignore_errors=True)
