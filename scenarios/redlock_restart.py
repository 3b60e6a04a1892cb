"""Redlock over five masters: one that granted the holder's lock restarts, and another client asks at once.

Kleppmann's argument against Redlock, run on real servers. Each trial starts five masters of its
own (the algorithm's recommended count; quorum three). Two are down while the holder asks, so its
grant stands on exactly three; they come back empty; then one of the holder's three restarts
(lab/faults/redlock_restart.py), and a contender asks all five while the holder's lease still runs.

Variants:
- no_persistence: the restarted master comes back empty, so the contender finds three free masters
  and holds the lock beside the holder.
- appendfsync_always: every master keeps an append-only file fsynced on every write, the control:
  the restarted master still has the key, and the contender finds two.

Cuts of two or three masters during the hold are not measured: the Redlock here (pottery, not
extended) gives the lock up at its TTL whatever is cut, as the pause and cut columns show.
"""

from __future__ import annotations

import shutil
from dataclasses import replace

from lab import faults
from lab.checkers.verdict import Verdict
from lab.declarations.columns import FaultFamily
from lab.stack.exposure import Trait, when
from lab.faults import FaultNotConfirmed
from lab.faults.redlock_restart import RedlockMasterRestart, keys_on
from lab.servers.redis.server import EmbeddedRedlockMasters
from lab.declarations.where import Service
from scenarios._column_kinds import ColumnKind
from scenarios._failover_trial import failover_trial, failover_judgement
from scenarios._lease_faults import LeaseFaultScenario
from scenarios._trial_folders import servers_folder
from scenarios.base import TrialEnv

MASTERS = 5
DOWN_WHILE_ASKING = 2  # the holder's grant then rests on exactly a quorum


# Its columns: a Redlock master restarted, each under its persistence.
REDLOCK_RESTART = ColumnKind(FaultFamily.RESTARTS, strikes=(Service.REDLOCK,))


class RedlockRestart(LeaseFaultScenario):
    name = "redlock_restart"
    summary = "Redlock over 5 masters, its grant on exactly 3; one of them restarts, another client asks at once"
    title = "a Redlock master restarted"
    replicated = True
    columns = (
        REDLOCK_RESTART("no_persistence", "a Redlock master that granted restarted empty", 20,
                        "one of the three masters that granted the holder's lock restarts without persistence; confirmed "
                        "by a new process on its port and the key gone",
                        also=(when(Trait.REDLOCK_APPENDFSYNC, "off", "no", "everysec"),)),
        REDLOCK_RESTART("appendfsync_always", "that master restarted with appendfsync always", 21,
                        "the same restart of a master that fsyncs an append-only file on every write; confirmed by a new "
                        "process and the key back", same_fault_as="no_persistence",
                        also=(when(Trait.REDLOCK_APPENDFSYNC, "always"),)),
    )
    # The TTL must outlast the restarts, so the contender asks while the holder's lease still runs.
    params = {
        "quick": {"ttl_s": 5.0, "trials": 1, "parallel": 2},
        "default": {"ttl_s": 5.0, "trials": 3, "parallel": 2},
    }

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        return faults.load(self.fault).applies_to(backend_cls)

    def pg_sessions(self, backend_cls, profile: str) -> int:
        return 2  # the runs' writes and the observer, on the run's PostgreSQL

    def run_trial(self, env: TrialEnv) -> dict:
        root = servers_folder(env.services, "redlock-restart-", RedlockMasterRestart.no_server)
        masters = EmbeddedRedlockMasters(root, count=MASTERS, prefix="master")
        for master in masters.masters:
            master.appendfsync_always = env.spec.variant == "appendfsync_always"
        try:
            masters.start()
            servers = replace(env.services, redlock_urls=masters.urls, embedded={Service.REDLOCK: masters}, tmp=None)
            down = masters.masters[-DOWN_WHILE_ASKING:]

            def before_holder() -> dict:
                for master in down:
                    master.stop()
                return {"down_while_asking": DOWN_WHILE_ASKING}

            def once_held() -> dict:
                for master in down:
                    master.start()  # back, empty: they never saw the holder's request
                holding = sum(bool(keys_on(master)) for master in masters.masters)
                if holding != MASTERS - DOWN_WHILE_ASKING:
                    raise FaultNotConfirmed(f"the holder's grant stands on {holding} masters, not on exactly "
                                            f"{MASTERS - DOWN_WHILE_ASKING}")
                return {"granted_by_before": holding}

            return failover_trial(replace(env, services=servers), faults.load(self.fault),
                                  before_holder=before_holder, once_held=once_held, ask_after=0.0, patience=0.0)
        finally:
            masters.stop()
            shutil.rmtree(root, ignore_errors=True)

    def judge(self, measures: dict, backend_cls) -> Verdict:
        return failover_judgement(measures, backend_cls)
