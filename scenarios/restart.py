"""The lock's server restarted while the holder holds: Redis forgets, PostgreSQL ends sessions, etcd keeps leases.

Variant aof_always restarts a Redis that keeps an append-only file fsynced on every write, the
configuration that keeps the lock and the fence counter across a restart.

A restart of the run's PostgreSQL (or Redlock's masters, or a server the lab was given, restarted by your
command) reaches every session on it, so such a trial runs alone (exclusive); a Redis or etcd lock's
trial restarts a server of its own (lab/faults/restart.py), so those run side by side.
"""

import backends
from lab.columns import Column
from lab.faults.restart import Restart as RestartFault
from scenarios._lease_faults import LeaseFaultScenario
from scenarios.base import TrialSpec


class Restart(LeaseFaultScenario):
    name = "restart"
    fault = "restart"
    summary = "the lock's server (PostgreSQL, Redis or etcd) restarted mid-hold; yours only with --fault-command restart=CMD"
    variants = ("server_restart", "aof_always")
    title = "lock server restarted"
    breaks_leases = True
    columns = (
        Column("server_restart", "lock server restarted", 9,
               "the server that holds the lock restarted on the same data (or by your --fault-command "
               "restart=CMD); confirmed by new server pids, or a new server identity"),
        Column("aof_always", "Redis restarted with appendfsync always", 10,
               "the same restart of a Redis that keeps an append-only file fsynced on every write; confirmed by "
               "new pids"),
    )
    faults = {"server_restart": "restart", "aof_always": "restart_aof"}
    params = {
        # parallel: the trials on servers of their own; the others run alone (exclusive)
        "quick": {"ttl_s": 1.0, "trials": 1, "parallel": 2},
        "default": {"ttl_s": 2.0, "trials": 2, "parallel": 4},
    }

    def exclusive(self, spec: TrialSpec, services) -> bool:
        """Alone unless the trial restarts a server of its own (a Redis or etcd lock where the lab started the
        run's): a restart of a server the run's trials share reaches all of theirs."""
        return not RestartFault.own_server(backends.load(spec.backend), services)

