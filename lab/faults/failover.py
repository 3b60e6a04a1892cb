"""The lock's PostgreSQL failed over: the primary crashed (immediate shutdown), its standby promoted.

It strikes a primary/standby pair the lab started (lab/servers/postgres/pair.py). confirm() proves the
failover happened: the old primary's process is gone, the node that now takes writes is the
former standby, out of recovery, on a later timeline; and it records what the new primary has of
the advisory locks (they are kept in memory, never replicated) and how far behind the standby was.
"""

from __future__ import annotations

from sqlalchemy import text

from lab.faults.base import Fault, FaultNotConfirmed, Target
from lab.servers.abilities import FailsOver
from lab.servers.postgres.pair import in_recovery, timeline


class Failover(Fault):
    strikes = "postgres"
    name = "failover"
    label = "PostgreSQL failed over to its standby"
    needs_server = FailsOver
    no_server = "failover needs a primary and a standby the lab started; it never fails over yours"

    def inject(self, target: Target) -> None:
        pair = target.services.embedded["postgres"]
        primary = pair.engine(pair.primary)
        try:
            target.evidence["timeline_before"] = timeline(primary)
        finally:
            primary.dispose()
        target.evidence["lag_at_failover"] = pair.lag()
        target.evidence["old_primary_pids"] = list(pair.primary.pids)
        pair.fail_over()

    def confirm(self, target: Target) -> dict:
        pair = target.services.embedded["postgres"]
        if pair.primary.pids:
            raise FaultNotConfirmed(f"the old primary still runs (pid {pair.primary.pids})")
        with target.monitor.connect() as conn:  # the multi-host monitor: whichever node takes writes now
            port = conn.execute(text("select inet_server_port()")).scalar()
            advisory: int = conn.execute(text("select count(*) from pg_locks where locktype = 'advisory'")).scalar_one()
        if port != pair.standby.port:
            raise FaultNotConfirmed(f"writes go to port {port}, not to the promoted standby's {pair.standby.port}")
        standby = pair.engine(pair.standby)
        try:
            recovering, now = in_recovery(standby), timeline(standby)
        finally:
            standby.dispose()
        before = target.evidence["timeline_before"]
        if recovering or now <= before:
            raise FaultNotConfirmed(f"the standby is {'still in recovery' if recovering else 'out of recovery'} "
                                    f"on timeline {now} (the primary's was {before})")
        return {"fault": self.name, "timeline_before": before, "timeline_after": now,
                "old_primary_pids": target.evidence["old_primary_pids"], "new_primary_port": port,
                "advisory_locks_on_new_primary": int(advisory), **target.evidence["lag_at_failover"]}
