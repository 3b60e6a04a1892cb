"""Whether the test session's own servers still run: a server that died takes every later test with it.

Why: when the session's PostgreSQL exited in stop 40's CI (most likely its data removed by another lab's sweep:
lab/servers/owner.py), the run went on for a hundred more tests, each failing with "connection refused", and the
output kept only their tails. The session now stops at the first test after which one of its servers has exited,
naming the server, its exit code, the test and the last line of its log.
"""

from __future__ import annotations

import subprocess

from lab.servers.processes import last_log_line


def _processes(server) -> list:
    """The server's processes of ours with their logs: one, or one per Redlock master."""
    parts = getattr(server, "masters", [server])
    return [(part, part.proc) for part in parts if isinstance(getattr(part, "proc", None), subprocess.Popen)]


def exited(embedded: dict) -> list[str]:
    """One line for each of these servers (name -> server, as Services.embedded) whose process has exited."""
    lines = []
    for name, server in embedded.items():
        for part, proc in _processes(server):
            if proc.poll() is not None:
                lines.append(f"{name} (pid {proc.pid}) exited with code {proc.returncode}: "
                             f"{last_log_line(part.log_path)}")
    return lines
