"""The holder's whole process stopped with SIGSTOP (Kleppmann's GC pause), then continued.

Every thread stops, keep-alives included. Confirmed by the process state: T (stopped).
"""

from __future__ import annotations

import signal
import subprocess
import time

import psutil

from lab.faults.base import Fault, FaultNotConfirmed, Target


def _holder(target: Target) -> subprocess.Popen:
    if target.holder is None:
        raise FaultNotConfirmed("a pause stops the holder's process, and this trial has no holder process")
    return target.holder.proc


class Pause(Fault):
    name = "pause"
    label = "holder paused past the TTL"

    def inject(self, target: Target) -> None:
        _holder(target).send_signal(signal.SIGSTOP)

    def confirm(self, target: Target, within: float = 5.0) -> dict:
        pid = _holder(target).pid
        deadline = time.monotonic() + within
        while True:
            try:
                status = psutil.Process(pid).status()
            except psutil.NoSuchProcess:
                raise FaultNotConfirmed(f"the holder (pid {pid}) ended instead of stopping") from None
            if status == psutil.STATUS_STOPPED:
                return {"fault": self.name, "pid": pid, "process_state": "T"}
            if time.monotonic() > deadline:
                raise FaultNotConfirmed(f"the holder (pid {pid}) was still {status!r} {within:g} s after SIGSTOP")
            time.sleep(0.005)  # the kernel has no event for "stopped"; its state is polled

    def heal(self, target: Target) -> dict:
        if target.holder is not None and target.holder.proc.poll() is None:
            target.holder.proc.send_signal(signal.SIGCONT)
        return {}
