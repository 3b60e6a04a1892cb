"""The user's own fault commands (`--fault-command HOOK=CMD`): which hooks exist, and how one is run.

On servers the lab did not start it never acts by itself: a fault there is the user's shell command
(their cluster manager's switchover, `docker pause`, a firewall rule, `kubectl delete pod`), run at
the fault's moment and then confirmed over the servers' own protocols (lab/servers/identity.py). A
command that fails is FaultNotConfirmed: the trial is an error, never a verdict.
"""

from __future__ import annotations

import os
import subprocess
from enum import Enum

from lab.faults.base import FaultNotConfirmed
from lab.servers.clients import redact_text
from lab.servers.services import Services

COMMAND_TIMEOUT = 120.0  # the user's command itself


class Hook(str, Enum):
    """What a user's command does to their servers, each confirmed its own way."""

    RESTART = "restart"  # the lock's server restarted: confirmed by a new server process (run_id, start time)
    FAILOVER = "failover"  # a failover or switchover: confirmed by a new primary or leader
    PAUSE = "pause"  # the primary stopped (docker pause, kill -STOP): confirmed by a new primary; needs heal
    PARTITION = "partition"  # the primary cut from its peers: confirmed by a new primary; needs heal
    HEAL = "heal"  # undoes pause or partition: confirmed by a primary answering and the old one back


HOOKS = tuple(h.value for h in Hook)


def run_fault_command(services: Services, fault: str, service: str) -> int:
    """Run the user's command for this hook; FaultNotConfirmed when it fails. It learns which hook, which service
    and which addresses (host:port, no password) from LAB_FAULT, LAB_FAULT_SERVICE and LAB_FAULT_ADDRESSES
    (for a Redis behind Sentinel, the Sentinels')."""
    command = services.fault_commands[fault]
    env = dict(os.environ, LAB_FAULT=fault, LAB_FAULT_SERVICE=service,
               LAB_FAULT_ADDRESSES=",".join(f"{h}:{p}" for h, p in services.addresses(service)))
    try:
        result = subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True, text=True,
                                timeout=COMMAND_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise FaultNotConfirmed(f"the {fault} command ran longer than {COMMAND_TIMEOUT:.0f} s") from None
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise FaultNotConfirmed(f"the {fault} command exited {result.returncode}: {redact_text(tail[0])}")
    return result.returncode
