"""The holder's whole process stopped with SIGSTOP (Kleppmann's GC pause), then continued.

Every thread stops, keep-alives included, and so does every process the holder started (a holder
program in another language, backends/external.py, is its child): the holder is all of them.
Confirmed by the process state of each: T (stopped).
"""

from __future__ import annotations

import os
import signal
import time

import psutil

from lab.faults.base import Fault, FaultNotConfirmed, HolderProc, Target


def _holder(target: Target) -> HolderProc:
    if target.holder is None:
        raise FaultNotConfirmed("a pause stops the holder's process, and this trial has no holder process")
    return target.holder.proc


def _children(pid: int) -> list[int]:
    """Every process the holder started, at any depth (its holder program), in the order psutil lists them."""
    try:
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


class Pause(Fault):
    name = "pause"
    label = "holder paused past the TTL"

    def __init__(self):
        self.children: list[int] = []

    def inject(self, target: Target) -> None:
        holder = _holder(target)
        # Its children stop first: a request the holder already sent them (a keep-alive's extend) must stay
        # in flight across the pause, as it would in one paused process, not complete in the moment between
        # the holder's stop and theirs (a Node.js extend that succeeded there hid the lease's loss from renew).
        self.children = _children(holder.pid)
        for pid in self.children:
            _signal(pid, signal.SIGSTOP)
        holder.send_signal(signal.SIGSTOP)
        late = [pid for pid in _children(holder.pid) if pid not in self.children]  # started before its stop
        for pid in late:
            _signal(pid, signal.SIGSTOP)
        self.children += late

    def confirm(self, target: Target, within: float = 5.0) -> dict:
        pid = _holder(target).pid
        deadline = time.monotonic() + within
        for each in [pid, *self.children]:
            _stopped(each, pid, deadline, within)
        evidence = {"fault": self.name, "pid": pid, "process_state": "T"}
        if self.children:
            evidence["children_stopped"] = list(self.children)
        return evidence

    def heal(self, target: Target) -> dict:
        for pid in self.children:
            _signal(pid, signal.SIGCONT)
        if target.holder is not None and target.holder.proc.poll() is None:
            target.holder.proc.send_signal(signal.SIGCONT)
        return {}


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass  # it ended: confirm() says so for a stop; a continue has nothing left to continue


def _stopped(pid: int, holder: int, deadline: float, within: float) -> None:
    """Wait until process pid is in state T; FaultNotConfirmed if it ends or is still running at the deadline."""
    what = "the holder" if pid == holder else "the holder's child"
    while True:
        try:
            status = psutil.Process(pid).status()
        except psutil.NoSuchProcess:
            raise FaultNotConfirmed(f"{what} (pid {pid}) ended instead of stopping") from None
        if status == psutil.STATUS_STOPPED:
            return
        if time.monotonic() > deadline:
            raise FaultNotConfirmed(f"{what} (pid {pid}) was still {status!r} {within:g} s after SIGSTOP")
        time.sleep(0.005)  # the kernel has no event for "stopped"; its state is polled
