"""The lock's PostgreSQL fails over to its standby mid-hold: what survives, and what the holder learns.

One crash serves every backend (FaultReach.ONE_EVENT): each event gets a primary and a streaming standby of
its own (lab/servers/postgres/pair.py), and every client, the holders' locks and writes included, a multi-host URL
that follows the primary. Every backend's holder takes its lock, on a company, a table and keys of its own, and
stops at its fault point; the primary crashes and the standby is promoted once (lab/faults/failover.py); each
contender asks the new primary; each holder goes on (scenarios/_shared_event.py). Each backend's trial is judged
on its own history, as if it had run alone.

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
import time
from dataclasses import replace

import psutil
from sqlalchemy import text

import backends
from lab import faults
from lab.checkers.outcomes import NotRun
from lab.checkers.verdict import Verdict
from lab.declarations.columns import FaultFamily
from lab.errors import LabError
from lab.stack.exposure import Trait, when
from lab.holder.process import HolderProcess
from lab.measures.promotion import PromotionProbe, create_probe_table
from lab.declarations.pacing import Lane
from lab.servers.postgres.pair import PostgresPair
from lab.servers.postgres.server import template_for
from lab.servers.postgres.sql import dispose, trial_engines
from lab.workload.table import ensure_schema
from scenarios._column_kinds import ColumnKind
from scenarios._failover_trial import NEVER_ACKNOWLEDGED, failover_judgement
from scenarios._lease_faults import LeaseFaultScenario, lease_params
from scenarios._shared_event import Shape, on_servers, sessions_for, shared_event
from scenarios._trial_folders import shared_folder
from scenarios.base import FaultReach, Skip, TrialEnv
from scenarios.events import EventEnv, EventOutcome, trial_of_event

__all__ = ["Failover", "NEVER_ACKNOWLEDGED"]

SCRIPTED = "scripted"  # who promoted, in the promotion measures: the lab itself, by pg_promote()
# The holders' idle_in_transaction guard outlasts the event's acquire phase: a holder inside its write waits at its
# fault point until every subject's holder holds, and the crash then ends its session anyway. These columns judge
# the failover; the guard's own column is `cases`.
GUARD_S = 120.0


# Its columns: a PostgreSQL failed over, each under its replication.
POSTGRES_FAILOVER = ColumnKind(FaultFamily.FAILOVER, strikes=("postgres",))


class Failover(LeaseFaultScenario):
    """Each event records, as its managed counterpart `patroni` does, how long the promotion took and what a probe
    client writing to the old primary got acknowledged after the crash (lab/measures/promotion.py)."""

    name = "failover"
    # A primary and a standby of each event's own: runs beside the run's other scenarios.
    pacing = replace(LeaseFaultScenario.pacing, lane=Lane.OWN_SERVERS)
    fault_reach = FaultReach.ONE_EVENT  # one crash of the primary serves every backend, each judged on its own
    summary = "the lock's PostgreSQL crashed and its standby promoted mid-hold: async, async lagging, sync lagging"
    title = "PostgreSQL failed over"
    replicated = True
    columns = (
        POSTGRES_FAILOVER("async", "PostgreSQL failed over (async)", 11,
                          "the primary crashes (immediate shutdown) and its asynchronous standby is promoted; confirmed by "
                          "the old process gone and the new primary out of recovery on a later timeline",
                          also=(when(Trait.REPLICATION, "async"),)),
        POSTGRES_FAILOVER("async_lagging", "failed over, standby behind (async)", 12,
                          "the same failover with the standby's replay paused, so it is behind when promoted; confirmed the"
                          " same way, with the lag recorded",
                          also=(when(Trait.REPLICATION, "async"),)),
        POSTGRES_FAILOVER("sync_lagging", "failed over, standby behind (sync)", 13,
                          "the same with a synchronous standby whose replay is paused; confirmed the same way", same_fault_as="async_lagging",
                          also=(when(Trait.REPLICATION, "sync"),)),
    )
    params = lease_params(parallel=3)  # trials: events per variant, each serving every backend

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        return faults.load(self.fault).applies_to(backend_cls)

    def pg_sessions(self, backend_cls, profile: str) -> int:
        return 0  # every session of an event is on the event's own pair of servers

    def trial_seconds(self, profile: str) -> float:
        """One event: a pair started from the run's template, the holders' grants, the promotion, one TTL for the
        contenders and their patience, the writes and the final tables (22 to 42 s for 36 subjects here, three
        events at once)."""
        return 30.0

    def run_trial(self, env: TrialEnv) -> dict:
        return trial_of_event(self, env)

    def run_event(self, env: EventEnv) -> EventOutcome:
        first = env.first
        run_server = first.services.embedded.get("postgres")
        if run_server is None:
            raise Skip(NotRun("failover needs a primary and a standby the lab started; it never fails over yours"))
        variant = env.event.variant
        root = shared_folder(first.services.tmp, "failover-")
        pair = PostgresPair(root, run_server.bin, synchronous=variant == "sync_lagging",
                            max_connections=sessions_for(len(env.subjects)),
                            template=template_for(run_server.bin, first.services.tmp) if first.services.tmp else None)
        monitor = writes = None
        try:
            pair.start()
            cluster = replace(first.services, pg_url=pair.url, embedded={"postgres": pair}, tmp=None)
            monitor, writes = trial_engines(pair.url)
            ensure_schema(monitor)
            backends.prepare_storage(monitor, sorted({spec.backend for spec in env.event.subjects}))
            create_probe_table(pair.node_url(pair.primary))  # before hold_back(): the standby has it too
            # Connected to the primary from before the fault, as a client already is; it writes from the fault on.
            probe = PromotionProbe(SCRIPTED, "primary", {"primary": pair.node_url(pair.primary),
                                                         "standby": pair.node_url(pair.standby)})

            def hold_back() -> dict:
                pair.wait_caught_up()  # every company exists on both nodes before anything is held back
                evidence: dict[str, object] = {"replication": "synchronous" if pair.synchronous else "asynchronous"}
                if variant.endswith("lagging"):
                    evidence["link_carried_before_cut"] = pair.hold_back()
                return evidence

            shape = Shape(before_holder=hold_back, at_fault=probe.start, guard_s=GUARD_S, monitor=monitor,
                          grant=lambda holder, within: _grant_or_commit_wait(holder, pair, within))
            try:
                with on_servers(env.subjects, cluster, pair.url) as subjects:
                    outcome = shared_event(subjects, faults.load(self.fault), shape)
            finally:
                probe.stop()
            promotion, details = probe.measures(pair.node_url(pair.standby)), probe.details()  # the standby leads now
            for subject in outcome.subjects:
                if subject.measures is not None:
                    subject.measures["promotion"] = dict(promotion)
                    subject.measures["evidence"]["probe"] = details
            return outcome
        finally:
            dispose(monitor, writes)
            pair.stop()
            shutil.rmtree(root, ignore_errors=True)

    def judge(self, measures: dict, backend_cls) -> Verdict:
        return failover_judgement(measures, backend_cls)


def _grant_or_commit_wait(holder: HolderProcess, pair: PostgresPair, within: float) -> tuple[dict | None, dict | None]:
    """The holder's acquire event, or, under synchronous replication with the standby cut off, evidence that its
    grant is a commit waiting for the standby: a session of this holder's own (by its client port) whose
    wait_event is SyncRep. Another subject's waiting commit is not this one's."""
    primary = pair.engine(pair.primary)
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            try:
                return holder.wait_for("acquire", 0.1), None
            except TimeoutError:
                pass
            if not pair.synchronous:
                continue
            ports = _client_ports(holder.proc.pid)
            if not ports:
                continue
            with primary.connect() as conn:
                waiting = conn.execute(text(
                    "select pid, round(extract(epoch from clock_timestamp() - query_start)::numeric, 3)::float as s, "
                    "left(query, 60) as query from pg_stat_activity where wait_event = 'SyncRep' "
                    "and client_port = any(:ports)"), {"ports": ports}).first()
            if waiting is not None:
                return None, {"pid": waiting.pid, "waiting_s": waiting.s, "query": waiting.query}
    finally:
        primary.dispose()
    raise LabError(f"the holder neither got an answer to its acquire nor waited on the standby "
                   f"within {within:.0f} s")


def _client_ports(pid: int) -> list[int]:
    """The local TCP ports of a holder process and its children (a holder program in another language): its
    PostgreSQL sessions, as pg_stat_activity's client_port shows them."""
    try:
        process = psutil.Process(pid)
        family = [process, *process.children(recursive=True)]
    except psutil.Error:
        return []
    ports = []
    for member in family:
        try:
            ports += [c.laddr.port for c in member.net_connections(kind="tcp") if c.laddr]
        except psutil.Error:  # it ended meanwhile
            continue
    return ports
