"""One Redlock master that granted the holder's lock restarts, with or without its data.

It strikes masters the lab started for the trial (an EmbeddedRedlockMasters). inject() restarts the
first master that holds a key; confirm() proves a new process answers on its port and records
whether the key came back with it (an append-only file fsynced on every write keeps it) and on how
many masters the holder's grant stands afterwards.
"""

from __future__ import annotations

from lab.faults.base import Fault, FaultNotConfirmed, Target
from lab.servers.abilities import RedlockMasters
from lab.servers.clients import redis_client


def keys_on(master) -> list[bytes]:
    """Every key one master holds (a trial's masters hold only the trial's keys)."""
    client = redis_client(master.url, socket_timeout=5)
    try:
        return client.keys("*")
    finally:
        client.close()


class RedlockMasterRestart(Fault):
    strikes = "redlock"
    name = "redlock_restart"
    label = "a Redlock master that granted restarted"
    needs_server = RedlockMasters
    no_server = "restarting a Redlock master needs masters the lab started; it never restarts yours"

    def inject(self, target: Target) -> None:
        masters = target.services.embedded["redlock"].masters
        granted = [i for i, master in enumerate(masters) if keys_on(master)]
        if not granted:
            raise FaultNotConfirmed("no master holds the holder's key: there is no grant to restart under")
        chosen = masters[granted[0]]
        target.evidence.update(restarted_master=granted[0], granted_by=len(granted), pids_before=list(chosen.pids))
        chosen.restart()

    def confirm(self, target: Target) -> dict:
        masters = target.services.embedded["redlock"].masters
        chosen = masters[target.evidence["restarted_master"]]
        before, after = target.evidence["pids_before"], list(chosen.pids)
        if not after or set(before) & set(after):
            raise FaultNotConfirmed(f"the master kept its process ({before} -> {after})")
        return {"fault": self.name, "masters": len(masters), **target.evidence, "pids_after": after,
                "kept_its_keys": bool(keys_on(chosen)),
                "granted_by_after": sum(bool(keys_on(master)) for master in masters)}
