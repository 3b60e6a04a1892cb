"""The lock's server restarted while the holder holds: Redis forgets, PostgreSQL ends sessions, etcd keeps leases.

Variant aof_always restarts a Redis that keeps an append-only file fsynced on every write, the
configuration that keeps the lock and the fence counter across a restart.

A restart reaches every session on that server, so these trials run one at a
time, and only against servers the lab started itself.
"""

from lab.columns import Column
from scenarios._lease_faults import LeaseFaultScenario


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
        "quick": {"ttl_s": 1.0, "trials": 1, "parallel": 1},
        "default": {"ttl_s": 2.0, "trials": 2, "parallel": 1},
    }

