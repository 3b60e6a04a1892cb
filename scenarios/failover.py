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
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace
from pathlib import Path

import backends
from lab import faults
from lab.errors import LabError
from lab.faults import Target
from lab.harness.checkers import lease_verdict
from lab.harness.holder import HolderProcess
from lab.harness.job import run_job
from lab.harness.workload import COMPANY_SIZE, ensure_schema
from lab.servers.clients import pg_engine
from lab.servers.cluster import PostgresPair
from scenarios._lease_faults import COMPANY, HEAL_GRACE_S, LeaseFaultScenario, holder_measures
from scenarios.base import Skip, TrialEnv

NEVER_ACKNOWLEDGED = "grant never acknowledged"
GRANT_WITHIN_S = 30.0


class Failover(LeaseFaultScenario):
    name = "failover"
    fault = "failover"
    summary = "the lock's PostgreSQL crashed and its standby promoted mid-hold: async, async lagging, sync lagging"
    variants = ("async", "async_lagging", "sync_lagging")
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
        pair = PostgresPair(root, run_server.bin, synchronous=env.spec.variant == "sync_lagging")
        monitor = writes = None
        try:
            pair.start()
            cluster = replace(env.services, pg_url=pair.url, embedded={"postgres": pair}, tmp=None)
            monitor = pg_engine(pair.url, isolation_level="AUTOCOMMIT", pool_pre_ping=True, pool_size=2,
                                connect_args={"application_name": "locklab-monitor"})
            writes = pg_engine(pair.url, pool_pre_ping=True, pool_size=2,
                               connect_args={"application_name": "locklab-writes"})
            ensure_schema(monitor)
            backends.prepare_storage(monitor, [env.spec.backend])
            return failover_trial(replace(env, services=cluster, monitor=monitor, writes=writes), pair,
                                  lagging=env.spec.variant.endswith("lagging"))
        finally:
            for engine in (monitor, writes):
                if engine is not None:
                    engine.dispose()
            pair.stop()
            shutil.rmtree(root, ignore_errors=True)

    def verdict(self, measures: dict) -> str:
        if measures.get("grant") == NEVER_ACKNOWLEDGED:
            return NEVER_ACKNOWLEDGED
        return lease_verdict(measures["lost"], measures["holder"]["write"])


def failover_trial(env: TrialEnv, pair: PostgresPair, lagging: bool) -> dict:
    """The lease-fault trial shape with a failover as the fault, and a grant that may never come back."""
    cls = backends.load(env.spec.backend)
    fault = faults.load("failover")
    ttl = env.params["ttl_s"]
    table = env.table()
    table.seed(env.writes, COMPANY, COMPANY_SIZE)
    pair.wait_caught_up()  # the company exists on both nodes before anything is held back
    guard = {"idle_in_transaction_session_timeout": f"{int(ttl * 1000)}ms"}
    spec = {"backend": cls.name, "backend_entry": backends.entry(cls.name), "key": env.key(), "options": {"ttl_s": ttl},
            "lock_settings": guard, "write_settings": guard, **env.services.to_addresses(),
            "table": table.name, "company": COMPANY, "rows": COMPANY_SIZE, "run_id": "holder",
            "fault_point": "before_write" if cls.holds_across_writes() else "after_delete"}
    contender = env.backend(table=table, options={"ttl_s": ttl}, key=spec["key"])
    evidence = {"replication": "synchronous" if pair.synchronous else "asynchronous"}
    if lagging:
        evidence["link_carried_before_cut"] = pair.hold_back()
    pool = ThreadPoolExecutor(1)
    holder = HolderProcess(spec)
    try:
        granted, waiting = _grant_or_commit_wait(holder, pair)
        if waiting is not None:
            evidence["grant_waiting"] = waiting
        elif not granted["granted"]:
            raise LabError("the holder could not take a fresh lock")
        else:
            holder.wait_for("at_point", 30)
        target = Target(env.services, env.monitor, cls, holder=holder)
        t_fault = time.monotonic()
        fault.inject(target)
        evidence.update(fault.confirm(target))  # FaultNotConfirmed makes this trial an error, never a verdict
        env.pause(max(0.0, t_fault + ttl + HEAL_GRACE_S - time.monotonic()))
        patience = ttl + 1.0
        other = pool.submit(run_job, contender, [COMPANY], COMPANY_SIZE, "contender", patience=patience)
        wait([other], timeout=patience + 0.5)
        t_heal = time.monotonic()
        if waiting is None:
            holder.go()
        events = holder.finish(timeout=30 + 3 * ttl)
        job = other.result(timeout=30 + 3 * ttl)
    finally:
        holder.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        contender.close()
    measures = holder_measures(events, job, table, env, "failover", spec["fault_point"], t_fault, t_heal, ttl,
                               run_level=cls.holds_across_writes())
    measures["evidence"] = evidence
    measures["contender"]["token"] = contender.token
    measures["grant"] = NEVER_ACKNOWLEDGED if waiting is not None else "acknowledged"
    holder_token, contender_token = measures["holder"]["token"], contender.token
    if waiting is None and job.acquired and holder_token is not None and contender_token is not None:
        # A fencing token only protects if the next holder's is higher; a lost grant can hand it out again.
        measures["token_reused"] = contender_token <= holder_token
    return measures


def _grant_or_commit_wait(holder: HolderProcess, pair: PostgresPair) -> tuple[dict | None, dict | None]:
    """The holder's acquire event, or, under synchronous replication with the standby cut off, evidence
    that its grant is a commit waiting for the standby (pg_stat_activity's wait_event SyncRep)."""
    from sqlalchemy import text

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
