"""The holder's connection to its lock server slow or lossy past the TTL: renewals that arrive late, or again and again.

A lease outlives its holder's network only as long as renewals keep arriving within the TTL. Each trial
builds a private network namespace (lab/servers/netns.py) with servers of its own inside: a PostgreSQL
for the writes (and lease_row's lease), and the lock's Redis, Redlock masters or etcd. The holder runs
there too, its lock connections through ports whose packets the fault delays or drops
(lab/servers/slow_link.py, lab/faults/slow_network.py); the contender and every other session reach
the same servers direct. Then the lease-fault trial (scenarios/_lease_faults.py): the holder stops at
its fault point, its lock connection turns slow or lossy for a TTL and the contender's patience, the
network heals, and the holder writes.

Variants: every round trip of the lock connection a third of a TTL longer (a renewal every TTL/3
still lands in time), a whole TTL longer (it cannot), and 30 % of its packets lost each way (TCP resends
each after its retransmission timeout, 200 ms at least). Strengths in between are for the margin search:
slow_network_trial(env, NetDelay(strength)) runs one trial at any strength.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import backends
from lab.declarations.capabilities import Capability
from lab.checkers.outcomes import DoesNotRun, NotRun
from lab.declarations.columns import FaultFamily
from lab.errors import LabError
from lab.faults.slow_network import NAMESPACED_SERVICES, NetDelay, NetLoss, SlowNetworkFault
from lab.measures.shapes import LeaseFaultMeasures
from lab.declarations.pacing import Lane
from lab.servers.netns import Bridge, NetNamespace
from lab.servers.own import OWN_SERVERS
from lab.servers.postgres.sql import dispose, trial_engines
from lab.servers.services import SERVICE_NAMES, Services
from lab.servers.slow_link import LinkUnavailable, SlowLink, unavailable_reason
from lab.workload.table import ensure_schema
from scenarios._column_kinds import ColumnKind
from scenarios._lease_faults import LeaseFaultScenario, lease_params, lease_fault_trial
from scenarios._trial_folders import private_namespace, shared_folder
from scenarios.base import Skip, TrialEnv

EXTERNAL = ("slows the network only around servers the lab starts, in a namespace of its own; it never touches "
            "your network")

def fault_of(variant: str) -> SlowNetworkFault:
    """A fresh fault for this variant, at the variant's strength."""
    return {"rtt_third": lambda: NetDelay(1 / 3), "rtt_ttl": lambda: NetDelay(1.0),
            "loss_30": lambda: NetLoss(0.30)}[variant]()


# Its columns: a slow or lossy lock connection, on every stack; it bears on a lease's renewals alone.
SLOW_LINK = ColumnKind(FaultFamily.NETWORK, needs=(Capability.LEASE_EXPIRY,))


class SlowNetwork(LeaseFaultScenario):
    name = "slow_network"
    # Servers of each trial's own, in its own namespace: runs beside the others.
    pacing = replace(LeaseFaultScenario.pacing, lane=Lane.OWN_SERVERS)
    fault = NetDelay
    summary = ("the holder's lock connection slowed (round trip +TTL/3, +TTL) or losing 30 % of its packets, in a "
               "private network namespace with servers of the trial's own; a contender tries meanwhile")
    title = "slow or lossy lock connection"
    columns = (
        SLOW_LINK("rtt_third", "lock connection slowed: round trip +TTL/3", 8.2,
                  "every packet of the holder's lock connection held TTL/6 each way in a private network namespace "
                  "(iptables NFQUEUE) past the TTL; confirmed by the lock's traffic counted through the slowed port "
                  "and a probe's round trip under the same rule measured against TTL/3"),
        SLOW_LINK("rtt_ttl", "lock connection slowed: round trip +TTL", 8.4,
                  "the same with each packet held TTL/2 each way, so a renewal's round trip takes a TTL more; confirmed "
                  "the same way against a TTL"),
        SLOW_LINK("loss_30", "lock connection losing 30 % of its packets", 8.6,
                  "each packet of the holder's lock connection dropped with probability 0.3, each way, on the input "
                  "hook of a private network namespace past the TTL; confirmed by the lock's traffic counted through "
                  "the port and the drop rule's counters on a probe against 30 %"),
    )
    params = lease_params(parallel=3)  # each trial starts a PostgreSQL of its own: a few at once on two cores

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        """n/a where the fault does not apply; where it does, *does not run* without root, iproute2 or iptables."""
        reason = fault_of(variant).applies_to(backend_cls)
        if reason is not None:
            return reason
        missing = unavailable_reason()
        return None if missing is None else DoesNotRun(missing)

    def pg_sessions(self, backend_cls, profile: str) -> int:
        return 0  # every session of a trial is on the trial's own server

    def trial_seconds(self, profile: str) -> float:
        """Its own servers' start (a PostgreSQL's initdb, mostly), then the lease-fault trial's timers."""
        return 5.0 + 4 * self.profile_params(profile)["ttl_s"]

    def run_trial(self, env: TrialEnv) -> dict:
        return dict(slow_network_trial(env, fault_of(env.spec.variant)))  # its shape: LeaseFaultMeasures


def slow_network_trial(env: TrialEnv, fault: SlowNetworkFault, step: int | None = None) -> LeaseFaultMeasures:
    """One lease-fault trial with this fault (made with its strength) on servers of its own in a private network
    namespace; Skip where the namespace, iptables or the run's own PostgreSQL binaries are missing. step: one of
    a margin search's trials (scenarios/margin.py), with a table and a lock key of its own.

    The servers and the holder are inside; the lab's side of the trial (the contender, the monitor, the fault's
    probe and rules) runs on the lab's threads outside, reaching the servers through a bridge each."""
    reason = unavailable_reason()
    if reason is not None:
        raise Skip(DoesNotRun(reason))
    run_server = env.services.embedded.get("postgres")
    if run_server is None or env.services.tmp is None:
        raise Skip(NotRun(EXTERNAL))
    cls = backends.load(env.spec.backend)
    namespace = private_namespace()
    root = shared_folder(env.services.tmp, "slownet-")
    inside = Services(tmp=None)  # the servers as the holder reaches them
    bridges: list[Bridge] = []
    monitor = writes = None
    try:
        namespace.run(_start_inside, inside.embedded, cls.services, root, namespace, env.services)
        for name, server in inside.embedded.items():  # the same embedded servers, now addressed
            inside = OWN_SERVERS[name].address(inside, server)
        outside = _bridged(inside, namespace, bridges)  # the same servers as the lab reaches them
        monitor, writes = trial_engines(outside.pg())
        ensure_schema(monitor)
        backends.prepare_storage(monitor, [cls.name])
        try:
            link = SlowLink(namespace)
        except LinkUnavailable as exc:
            raise Skip(DoesNotRun(str(exc))) from None
        fault.attach(link, inside)
        return lease_fault_trial(replace(env, services=outside, monitor=monitor, writes=writes), fault, step=step)
    finally:
        dispose(monitor, writes)
        for bridge in bridges:
            bridge.stop()
        inside.stop()
        namespace.close()
        shutil.rmtree(root, ignore_errors=True)


def _start_inside(embedded: dict, needed: tuple[str, ...], root: Path, namespace: NetNamespace,
                  run: Services) -> None:
    """Start the servers a backend needs, made like the run's (lab/servers/own.py), on a thread inside the namespace
    (their readiness checks connect from it), each put in embedded as it comes up, so that stopping the services
    that hold it stops whatever did start."""
    for name in (n for n in SERVICE_NAMES if n in needed):
        if name not in NAMESPACED_SERVICES:  # the fault declares these n/a (lab/faults/slow_network.py)
            raise LabError(f"{name} is not started inside the slow network's namespace")
        server = OWN_SERVERS[name].make(root, run, namespace.fd)
        embedded[name] = server
        server.start()


def _bridged(inside: Services, namespace: NetNamespace, bridges: list[Bridge]) -> Services:
    """inside's addresses as the lab reaches them: each server through a bridge of its own (appended to bridges)."""
    outside = replace(inside, embedded={}, tmp=None)
    for service in (n for n in SERVICE_NAMES if n in inside.embedded):
        ports = []
        for _, port in inside.addresses(service):
            bridges.append(bridge := Bridge(namespace, port).start())
            ports.append(bridge.port)
        outside = outside.routed(service, ports)
    return outside
