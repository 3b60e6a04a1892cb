"""The lock's server restarted while the holder holds: Redis forgets, PostgreSQL ends sessions, etcd keeps leases.

Variant aof_always restarts a Redis that keeps an append-only file fsynced on every write, the
configuration that keeps the lock and the fence counter across a restart.

A restart reaches every session on the server, so each trial restarts a server of its own where the lab
started the run's: a Redis or etcd lock's (lab/faults/restart.py), and a PostgreSQL lock's trial runs whole
(its lock, its writes, the contender and the monitor) on a PostgreSQL of its own (scenarios/_own_postgres.py),
as the lock and the writes shared the run's. Those run side by side. A restart of Redlock's masters or of a
server the lab was given (restarted by your command) reaches every trial on it, so such a trial runs alone
(exclusive).
"""

from dataclasses import replace

import backends
from lab.columns import Column, FaultFamily
from lab.exposure import Trait, when
from lab.faults.restart import Restart as RestartFault
from lab.measures.kinds import Measured
from lab.pacing import Exclusive
from scenarios._lease_faults import LeaseFaultScenario
from scenarios._own_postgres import can_have_own_postgres, own_postgres
from scenarios.base import TrialEnv, TrialSpec


# A Redis (or Redlock master) that fsyncs its append-only file on every write is aof_always's column: its own.
NOT_ALWAYS = ("off", "no", "everysec")


class Restart(LeaseFaultScenario):
    name = "restart"
    measured = Measured.SERVER_RESTART
    fault = "restart"
    summary = "the lock's server (PostgreSQL, Redis or etcd) restarted mid-hold; yours only with --fault-command restart=CMD"
    variants = ("server_restart", "aof_always")
    title = "lock server restarted"
    breaks_leases = True
    columns = (
        Column("server_restart", "lock server restarted", 9,
               "the server that holds the lock restarted on the same data (or by your --fault-command "
               "restart=CMD); confirmed by new server pids, or a new server identity",
               family=FaultFamily.RESTARTS, happens_when=(when(Trait.REDIS_APPENDFSYNC, *NOT_ALWAYS), when(Trait.REDLOCK_APPENDFSYNC, *NOT_ALWAYS))),
        Column("aof_always", "Redis restarted with appendfsync always", 10,
               "the same restart of a Redis that keeps an append-only file fsynced on every write; confirmed by "
               "new pids", same_fault_as="server_restart",
               family=FaultFamily.RESTARTS, happens_when=(when(Trait.REDIS_APPENDFSYNC, "always"),)),
    )
    faults = {"server_restart": "restart", "aof_always": "restart_aof"}
    params = {
        # parallel: the trials on servers of their own; the others run alone (exclusive)
        "quick": {"ttl_s": 1.0, "trials": 1, "parallel": 2},
        "default": {"ttl_s": 2.0, "trials": 3, "parallel": 4},
    }

    # A trial on a server the run's trials share runs with none of them beside it (exclusive).
    pacing = replace(LeaseFaultScenario.pacing, exclusive=Exclusive.PER_TRIAL)

    def exclusive(self, spec: TrialSpec, services) -> bool:
        """Its pacing's Exclusive.PER_TRIAL, a hook because it depends on the backend and the servers: alone unless
        the trial restarts a server of its own (a Redis, etcd or PostgreSQL lock where the lab started the run's): a
        restart of a server the run's trials share reaches all of theirs."""
        cls = backends.load(spec.backend)
        return not (RestartFault.own_server(cls, services) or _on_own_postgres(cls, services))

    def run_trial(self, env: TrialEnv) -> dict:
        if not _on_own_postgres(backends.load(env.spec.backend), env.services):
            return super().run_trial(env)
        with own_postgres(env, "restart-postgres") as inside:
            measures = super().run_trial(inside)
        measures["evidence"]["server"] = "the trial's own"  # the fault restarted the server it was handed
        return measures


def _on_own_postgres(backend_cls, services) -> bool:
    """Whether a trial of this backend runs whole on a PostgreSQL of its own: its lock is on PostgreSQL, which
    the lab started (a server it was given is restarted only by your command, and is the run's)."""
    return backend_cls.lock_service == "postgres" and can_have_own_postgres(services)

