"""The lock's server restarted while the holder holds: Redis forgets, PostgreSQL ends sessions, etcd keeps leases.

Variant aof_always restarts a Redis that keeps an append-only file fsynced on every write, the
configuration that keeps the lock and the fence counter across a restart.

A restart reaches every session on the server, so each trial restarts a server of its own where the lab
started the run's: a Redis, etcd, ZooKeeper or Redlock lock's (lab/faults/own_server.py), and a PostgreSQL or
MariaDB lock's trial runs whole (its lock, its writes, the contender and the monitor) on a server of its own
(scenarios/_own_store.py), as the lock and the writes shared the run's. Those run side by side. A restart of a
server the lab was given (restarted by your command) reaches every trial on it, so such a trial runs alone
(exclusive).
"""

from dataclasses import replace

import backends
from lab.declarations.columns import Column, FaultFamily
from lab.stack.exposure import Trait, when
from lab.faults.restart import Restart as RestartFault
from lab.measures.kinds import Measured
from lab.declarations.pacing import Exclusive
from lab.declarations.where import Service
from scenarios._lease_faults import LeaseFaultScenario, lease_params
from scenarios._own_store import OnOwnStore, on_own_store
from scenarios.base import TrialSpec


# A Redis (or Redlock master) that fsyncs its append-only file on every write is aof_always's column: its own.
NOT_ALWAYS = ("off", "no", "everysec")


class Restart(OnOwnStore, LeaseFaultScenario):
    name = "restart"
    measured = Measured.SERVER_RESTART
    summary = "the lock's server (PostgreSQL, Redis or etcd) restarted mid-hold; yours only with --fault-command restart=CMD"
    title = "lock server restarted"
    columns = (
        Column("server_restart", "lock server restarted", 9,
               "the server that holds the lock restarted on the same data (or by your --fault-command "
               "restart=CMD); confirmed by new server pids, or a new server identity",
               family=FaultFamily.RESTARTS, happens_when=(when(Trait.REDIS_APPENDFSYNC, *NOT_ALWAYS), when(Trait.REDLOCK_APPENDFSYNC, *NOT_ALWAYS))),
        Column("aof_always", "Redis restarted with appendfsync always", 10,
               "the same restart of a Redis that keeps an append-only file fsynced on every write; confirmed by "
               "new pids", same_fault_as="server_restart", strikes=(Service.REDIS,),
               family=FaultFamily.RESTARTS, happens_when=(when(Trait.REDIS_APPENDFSYNC, "always"),)),
    )
    faults = {"server_restart": "restart", "aof_always": "restart_aof"}
    # parallel: the trials on servers of their own; the others run alone (exclusive)
    params = lease_params(parallel=2, default_parallel=4)

    # A trial on a server the run's trials share runs with none of them beside it (exclusive).
    pacing = replace(LeaseFaultScenario.pacing, exclusive=Exclusive.PER_TRIAL)

    def exclusive(self, spec: TrialSpec, services) -> bool:
        """Its pacing's Exclusive.PER_TRIAL, a hook because it depends on the backend and the servers: alone unless
        the trial restarts a server of its own (any lock on a server the lab started for the run): a restart of a
        server the run's trials share reaches all of theirs."""
        cls = backends.load(spec.backend)
        return not (RestartFault.own_server(cls, services) or on_own_store(cls, services))
