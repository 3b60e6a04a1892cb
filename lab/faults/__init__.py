"""Faults: what the world does to a run's sessions, servers and processes, one module each.

Every fault injects, confirms that it struck (the evidence goes into the trial) and
heals. A fault shared by several scenarios is one module here plus one line in FAULTS; a fault of
one scenario may live in that scenario's module (scenarios/server_pause.py). Scenarios and the
kill-point search use these same names.
"""

from lab.faults.base import Fault, FaultNotConfirmed, GradedFault, Route, Target
from lab.faults.cut import Cut
from lab.faults.etcd_leader_kill import EtcdLeaderKill
from lab.faults.etcd_partition import EtcdPartition, EtcdPartitionLeader
from lab.faults.failover import Failover
from lab.faults.net_drop import NetDrop
from lab.faults.patroni import PatroniAgentPause, PatroniDcsCut, PatroniPostgresCrash, PatroniSwitchover
from lab.faults.pause import Pause
from lab.faults.redis_failover import RedisFailover
from lab.faults.redlock_clock import RedlockClockControl, RedlockClockFast, RedlockClockJump
from lab.faults.redlock_restart import RedlockMasterRestart
from lab.faults.restart import Restart
from lab.faults.restart_aof import RestartWithAof
from lab.faults.server_clock import ServerClockFast, ServerClockJump
from lab.faults.session_timeout import (
    SessionTimeout,
    idle_in_transaction_timeout,
    idle_session_timeout,
    mariadb_guard,
)
from lab.faults.terminate import TerminateSession, terminate_confirmed

# Faults that strike a holder mid-hold, by name: a fresh instance per trial.
FAULTS: dict[str, type[Fault]] = {"pause": Pause, "cut": Cut, "restart": Restart, "restart_aof": RestartWithAof,
                                   "failover": Failover, "redis_failover": RedisFailover,
                                   "etcd_partition": EtcdPartition, "etcd_partition_leader": EtcdPartitionLeader,
                                   "etcd_leader_kill": EtcdLeaderKill,
                                   "redlock_restart": RedlockMasterRestart, "net_drop": NetDrop,
                                   "patroni_crash": PatroniPostgresCrash, "patroni_agent_pause": PatroniAgentPause,
                                   "patroni_dcs_cut": PatroniDcsCut, "patroni_switchover": PatroniSwitchover,
                                   "server_clock_jump": ServerClockJump, "server_clock_fast": ServerClockFast,
                                   "redlock_clock_jump": RedlockClockJump, "redlock_clock_control": RedlockClockControl,
                                   "redlock_clock_fast": RedlockClockFast}


def load(fault: str | type[Fault] | Fault) -> Fault:
    """A fresh instance of a fault: one registered here by name, or a fault class a scenario declares
    in its own module (a new fault is then that one file plus its scenario's registry line); an instance
    is used as it is (a fault of a chosen strength: lab/faults/slow_network.py, lab/measures/margin.py)."""
    if isinstance(fault, Fault):
        return fault
    return FAULTS[fault]() if isinstance(fault, str) else fault()


__all__ = ["FAULTS", "Fault", "FaultNotConfirmed", "GradedFault", "Route", "Target", "Cut", "Failover", "NetDrop", "RedisFailover", "RedlockMasterRestart", "Pause", "Restart", "RestartWithAof",
           "RedlockClockControl", "RedlockClockFast", "RedlockClockJump", "ServerClockFast", "ServerClockJump",
           "SessionTimeout", "TerminateSession", "idle_in_transaction_timeout", "idle_session_timeout", "mariadb_guard",
           "load", "terminate_confirmed"]
