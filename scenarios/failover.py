"""The lock's PostgreSQL fails over to its standby mid-hold: what survives, and what the holder learns.

Each trial gets a primary and a streaming standby of its own (lab/servers/cluster.py), and every
client, the holder's lock and writes included, a multi-host URL that follows the primary. The
holder takes its lock and stops at its fault point; the primary crashes and the standby is
promoted (lab/faults/failover.py); a contender asks the new primary; the holder goes on.

Variants:
- async: asynchronous streaming with nothing held back, a failover on a quiet network.
- async_lagging: the standby's replication link is blackholed before the holder asks for its
  lock, so all the primary acknowledges from then on (the grant, a lease row, its token) is
  missing on the new primary: asynchronous replication's window, made certain.
- sync_lagging: the same cut under synchronous_commit = on: the primary acknowledges nothing the
  standby lacks, so a grant that needs a commit waits, and the failover ends it unacknowledged.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from sqlalchemy import text

import backends
from lab import faults
from lab.columns import Column
from lab.errors import LabError
from lab.exposure import Trait, when
from lab.harness.holder import HolderProcess
from lab.harness.promotion import PromotionProbe, create_probe_table
from lab.harness.verdict import Verdict
from lab.harness.workload import ensure_schema
from lab.servers.cluster import PostgresPair
from lab.servers.pg import dispose, trial_engines
from lab.servers.pg_template import template_for
from scenarios._failover_trial import GRANT_WITHIN_S, NEVER_ACKNOWLEDGED, failover_trial, failover_judgement
from scenarios._lease_faults import LeaseFaultScenario
from scenarios.base import OWN_SERVERS, Skip, TrialEnv

__all__ = ["Failover", "NEVER_ACKNOWLEDGED"]

SCRIPTED = "scripted"  # who promoted, in the promotion measures: the lab itself, by pg_promote()


class Failover(LeaseFaultScenario):
    """Each trial records, as its managed counterpart `patroni` does, how long the promotion took and what a probe
    client writing to the old primary got acknowledged after the crash (lab/harness/promotion.py)."""

    name = "failover"
    lane = OWN_SERVERS  # a primary and a standby of each trial's own: runs beside the run's other scenarios
    fault = "failover"
    summary = "the lock's PostgreSQL crashed and its standby promoted mid-hold: async, async lagging, sync lagging"
    variants = ("async", "async_lagging", "sync_lagging")
    title = "PostgreSQL failed over"
    breaks_leases = True
    replicated = True
    columns = (
        Column("async", "PostgreSQL failed over (async)", 11,
               "the primary crashes (immediate shutdown) and its asynchronous standby is promoted; confirmed by "
               "the old process gone and the new primary out of recovery on a later timeline",
               happens_when=(when(Trait.REPLICATION, "async"),), strikes=("postgres",)),
        Column("async_lagging", "failed over, standby behind (async)", 12,
               "the same failover with the standby's replay paused, so it is behind when promoted; confirmed the"
               " same way, with the lag recorded",
               happens_when=(when(Trait.REPLICATION, "async"),), strikes=("postgres",)),
        Column("sync_lagging", "failed over, standby behind (sync)", 13,
               "the same with a synchronous standby whose replay is paused; confirmed the same way", same_fault_as="async_lagging",
               happens_when=(when(Trait.REPLICATION, "sync"),), strikes=("postgres",)),
    )
    params = {
        "quick": {"ttl_s": 1.0, "trials": 1, "parallel": 3},
        "default": {"ttl_s": 2.0, "trials": 2, "parallel": 3},
    }

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        return faults.load(self.fault).applies_to(backend_cls)

    def pg_sessions(self, backend_cls, profile: str) -> int:
        return 0  # every session of a trial is on the trial's own pair of servers

    def run_trial(self, env: TrialEnv) -> dict:
        run_server = env.services.embedded.get("postgres")
        if run_server is None:
            raise Skip("failover needs a primary and a standby the lab started; it never fails over yours")
        root = Path(tempfile.mkdtemp(prefix="failover-", dir=env.services.tmp))
        root.chmod(0o755)
        pair = PostgresPair(root, run_server.bin, synchronous=env.spec.variant == "sync_lagging",
                            template=template_for(run_server.bin, env.services.tmp) if env.services.tmp else None)
        monitor = writes = None
        try:
            pair.start()
            cluster = replace(env.services, pg_url=pair.url, embedded={"postgres": pair}, tmp=None)
            monitor, writes = trial_engines(pair.url)
            ensure_schema(monitor)
            backends.prepare_storage(monitor, [env.spec.backend])
            create_probe_table(pair.node_url(pair.primary))  # before hold_back(): the standby has it too
            # Connected to the primary from before the fault, as a client already is; it writes from the fault on.
            probe = PromotionProbe(SCRIPTED, "primary", {"primary": pair.node_url(pair.primary),
                                                         "standby": pair.node_url(pair.standby)})

            def hold_back() -> dict:
                pair.wait_caught_up()  # the company exists on both nodes before anything is held back
                evidence: dict[str, object] = {"replication": "synchronous" if pair.synchronous else "asynchronous"}
                if env.spec.variant.endswith("lagging"):
                    evidence["link_carried_before_cut"] = pair.hold_back()
                return evidence

            try:
                measures = failover_trial(replace(env, services=cluster, monitor=monitor, writes=writes),
                                          faults.load(self.fault), before_holder=hold_back, at_fault=probe.start,
                                          grant=lambda holder: _grant_or_commit_wait(holder, pair))
            finally:
                probe.stop()
            measures["promotion"] = probe.measures(pair.node_url(pair.standby))  # the standby is the primary now
            measures["evidence"]["probe"] = probe.details()
            return measures
        finally:
            dispose(monitor, writes)
            pair.stop()
            shutil.rmtree(root, ignore_errors=True)

    def judge(self, measures: dict, backend_cls) -> Verdict:
        return failover_judgement(measures, backend_cls)


def _grant_or_commit_wait(holder: HolderProcess, pair: PostgresPair) -> tuple[dict | None, dict | None]:
    """The holder's acquire event, or, under synchronous replication with the standby cut off, evidence
    that its grant is a commit waiting for the standby (pg_stat_activity's wait_event SyncRep)."""
    primary = pair.engine(pair.primary)
    deadline = time.monotonic() + GRANT_WITHIN_S
    try:
        while time.monotonic() < deadline:
            try:
                return holder.wait_for("acquire", 0.1), None
            except TimeoutError:
                pass
            if not pair.synchronous:
                continue
            with primary.connect() as conn:
                waiting = conn.execute(text(
                    "select pid, round(extract(epoch from clock_timestamp() - query_start)::numeric, 3)::float as s, "
                    "left(query, 60) as query from pg_stat_activity where wait_event = 'SyncRep'")).first()
            if waiting is not None:
                return None, {"pid": waiting.pid, "waiting_s": waiting.s, "query": waiting.query}
    finally:
        primary.dispose()
    raise LabError(f"the holder neither got an answer to its acquire nor waited on the standby "
                   f"within {GRANT_WITHIN_S:.0f} s")
