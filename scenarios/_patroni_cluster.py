"""The patroni scenario's event on a Patroni cluster the lab started: its clients' route, the promotion probe, the
shared event's shape around the holders, and the cluster settled after the heal (scenarios/patroni.py runs it).
"""

from __future__ import annotations

import copy
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

import backends
from lab.errors import LabError
from lab.faults import Fault
from lab.faults import load as load_fault
from lab.measures.promotion import PromotionProbe, create_probe_table
from lab.servers.patroni.cluster import PatroniCluster, PatroniNode
from lab.servers.patroni.health_router import PrimaryRouter
from lab.servers.postgres.sql import dispose, trial_engines
from lab.workload.table import ensure_schema
from scenarios._shared_event import Shape, on_servers, shared_event
from scenarios.base import TrialEnv
from scenarios.events import EventEnv, EventOutcome

SETTLE_WITHIN_S = 60.0  # after the heal: the old primary demoted, rewound and streaming again
# The holder's idle_in_transaction guard outlasts every fault here (a promotion takes the ttl, 20 s): these
# columns judge Patroni, and the guard's own column is `cases`.
GUARD_S = 120.0
ROUTE_WITHIN_S = 15.0  # after a promotion, until the health-checked route leads to the new primary


def on_cluster(env: EventEnv, cluster: PatroniCluster, fault: str | type[Fault], routed: bool) -> EventOutcome:
    """The event on a started cluster: its clients' route (a multi-host URL, or the REST-checked router), the
    lab's schema, the promotion probe on the old primary, then the shared event, each subject's measures told
    what the probe, the cluster and the router saw (routed: clients behind the REST-checked router)."""
    old = cluster.leader()
    if old is None:
        raise LabError(f"the new Patroni cluster names no leader: {cluster.view()}")
    router = probe = monitor = writes = None
    try:
        client_url = cluster.url
        if routed:
            router = PrimaryRouter([(n.port, _primary_check(n)) for n in cluster.nodes]).start()
            router.wait_routable()
            client_url = cluster.node_url(old).set(port=router.port)
        services = replace(env.first.services, pg_url=client_url, embedded={"postgres": cluster}, tmp=None)
        monitor, writes = trial_engines(client_url)
        ensure_schema(monitor)
        backends.prepare_storage(monitor, sorted({spec.backend for spec in env.event.subjects}))
        create_probe_table(cluster.node_url(old))
        # Connected to the old primary from before the fault, as a client already is; it writes from the fault on.
        probe = PromotionProbe(cluster.manager, old.name, {n.name: cluster.node_url(n) for n in cluster.nodes})
        with on_servers(env.subjects, services, client_url) as subjects:
            outcome = shared_event(subjects, load_fault(fault),
                                   event_shape(cluster, old, router, probe, [monitor, writes], subjects))
        probe.stop()
        survivor = cluster.leader()
        extra = {"promotion": probe.measures(None if survivor is None else cluster.node_url(survivor)),
                 "patroni": {**cluster.settings.to_json(), "nodes": len(cluster.nodes),
                             "version": cluster.runtime.version,
                             "clients": "REST health check (GET /primary)" if router is not None
                             else "multi-host URL, target_session_attrs=read-write"}}
        evidence = {"probe": probe.details()}
        if router is not None:
            evidence["router"] = {"ports": {n.name: n.port for n in cluster.nodes}, "routed": list(router.routed)}
        for subject in outcome.subjects:
            if subject.measures is not None:
                subject.measures.update(copy.deepcopy(extra))
                subject.measures["evidence"].update(copy.deepcopy(evidence))
        return outcome
    finally:
        if probe is not None:
            probe.stop()
        dispose(monitor, writes)
        if router is not None:
            router.stop()

def event_shape(cluster: PatroniCluster, old: PatroniNode, router: PrimaryRouter | None, probe: PromotionProbe,
                engines: list, subjects: list[TrialEnv]) -> Shape:
    """What the event does around its holders on the lab's cluster: the replica caught up before the fault, the
    contenders' route to the new primary after it, and the cluster settled after the heal, every engine then
    started afresh so that each final table is read on the primary that survived."""

    def caught_up() -> dict:
        # The seeds, the holders' grants and the probe's table on the replica before anything strikes.
        cluster.wait_caught_up()
        return {}

    def settle() -> dict:
        return _settle(cluster, old, engines + [e for env in subjects for e in (env.monitor, env.writes)])

    def routed_to_leader() -> dict:
        # The contenders ask once their route leads to the new primary, as they would behind HAProxy.
        leader = cluster.leader(via=next(n for n in cluster.nodes if n is not old))
        if router is None or leader is None:
            return {}
        started = time.monotonic()
        router.wait_routable(ROUTE_WITHIN_S, to=leader.port)
        return {"routed_to_new_primary_after_s": round(time.monotonic() - started, 3)}

    return Shape(once_held=caught_up, at_fault=probe.start, settle=settle, guard_s=GUARD_S, retry_errors=True,
                 before_contender=routed_to_leader, monitor=engines[0])


def _primary_check(node: PatroniNode) -> Callable[[], bool]:
    """The health check HAProxy runs against a Patroni node: its REST API's GET /primary answers 200."""
    return lambda: node.rest("/primary")[0] == 200


def _settle(cluster: PatroniCluster, old: PatroniNode, engines: list) -> dict:
    """After the heal: until exactly one postgres is out of recovery and Patroni names it leader (else the trial
    cannot say which table is the final one: an error), then, within SETTLE_WITHIN_S, the old primary back as a
    replica. Records how long, whether the old primary was rewound (its agent's log), and both views."""
    started = time.monotonic()
    deadline = started + SETTLE_WITHIN_S
    views: dict = {}
    while time.monotonic() < deadline:
        servers = cluster.servers_view()
        primaries = [name for name, state in servers.items() if state.get("in_recovery") is False]
        leader = cluster.leader(via=cluster.node(primaries[0])) if len(primaries) == 1 else None
        views = {"patroni": cluster.view(), "servers": servers}
        if leader is not None and leader.name == primaries[0]:
            break
        time.sleep(0.2)
    else:
        raise LabError(f"the Patroni cluster did not settle on one primary within {SETTLE_WITHIN_S:.0f} s: {views}")
    one_primary_s = round(time.monotonic() - started, 3)
    try:
        views = cluster.wait_healthy(max(1.0, deadline - time.monotonic()))
        rejoined = True
    except LabError:
        rejoined = False
    for engine in engines:
        engine.dispose()  # the final table is read on a fresh connection to the primary that survived
    return {"settled": {"one_primary_s": one_primary_s, "old_primary_rejoined": rejoined,
                        "rejoined_s": round(time.monotonic() - started, 3) if rejoined else None,
                        "old_primary_rewound": "pg_rewind" in _log_text(old.log_path), "after": views}}


def _log_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
