"""What the tests of a user's own cluster share (Patroni's, Sentinel's): the cluster started with a partitioner
thread beside it, the partition and heal hooks a user writes for it, and `lab run` given those hooks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from tests.server.helpers import shared_tmp


@contextmanager
def started_with(servers, partitioner, folder: Path):
    """servers started, then partitioner (a thread that cuts while its trigger file exists); after, the partitioner
    told to stop, the servers stopped and folder removed."""
    try:
        servers.start()
        partitioner.start()
        yield
    finally:
        partitioner.done.set()
        servers.stop()
        shutil.rmtree(folder, ignore_errors=True)


def trigger_hooks(folder: Path) -> dict[str, str]:
    """The partition hook (it creates the partitioner's trigger file) and the heal hook (it resumes the process a
    pause hook wrote to folder/paused, and removes the trigger), as a user writes them."""
    return {
        "partition": f"touch {folder}/partition",
        "heal": f"if [ -f {folder}/paused ]; then kill -CONT $(cat {folder}/paused); rm {folder}/paused; fi; "
                f"rm -f {folder}/partition",
    }


def hooked_lab_run(tmp_path: Path, scenario: str, users_env: dict[str, str], secret: str, hooks: dict[str, str],
                   *args: str, timeout: float, wrapper: tuple[str, ...] = (),
                   cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`lab run --scenario SCENARIO --profile quick` with hooks as --fault-command and the user's cluster in
    users_env (the environment, never argv: secret must not appear there); wrapper: what runs the lab."""
    tmp = shared_tmp(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
    env.update(TMPDIR=str(tmp), **users_env)
    argv = [*wrapper, sys.executable, "-m", "lab.cli", "run", "--profile", "quick", "--results", str(tmp_path / "r"),
            "--scenario", scenario, *args]
    for hook, command in hooks.items():
        argv += ["--fault-command", f"{hook}={command}"]
    assert not [a for a in argv if secret in a]
    try:
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, check=False, cwd=cwd)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
