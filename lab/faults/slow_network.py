"""The holder's connection to its lock server made slow or lossy, in a private network namespace.

A lease lives as long as its renewals arrive: a network that is slow rather than cut makes them
arrive late, or, losing packets, makes TCP send them again after its retransmission timeout. Each
fault here is made with its strength, one number, so that a search for the largest a lease survives
can hand it any:

- NetDelay(strength): every round trip of the holder's lock connections takes strength x TTL more
  (half of it on each way, or all of it on the way to the server with one_way=True: renewals then
  arrive that late and their answers come at once). Packets are parked by iptables' NFQUEUE and held by
  lab/servers/nfqueue.py.
- NetLoss(share): each of their packets is dropped with that probability (each way, or toward the server
  only with one_way=True), by iptables' statistic match on the input hook.

The holder runs in the namespace with the servers and reaches its lock's server(s) through a slowed port
each (lab/servers/slow_link.py); the contender and every other session of the lab go direct (through a
bridge into the namespace, lab/servers/netns.py). The scenario that owns the namespace attaches its
SlowLink and the servers' addresses inside it before the trial (attach()); the TTL comes with the target.

route(): the slowed ports, and the helper process that holds packets and times the probe
(lab/servers/nfqueue.py), started before the holder asks. inject(): the fault's rules on those ports
and on the probe's.
confirm(): the holder's lock traffic went through the slowed ports before the fault (their counters), and
a UDP echo on a port under the same rules measures the fault at its strength: its round trip against
the configured one (timed by the holding process itself), or the share of its packets the drop rule
took against the configured share.
heal(): the rules go, held packets are let through at once and the helper ends (close() ends it too, for
a trial that failed before the fault struck); the evidence says what the holder's own packets went through.
"""

from __future__ import annotations

import math
import statistics
from typing import ClassVar

from lab.declarations.capabilities import Capability
from lab.faults.base import Fault, FaultNotConfirmed, GradedFault, Route, Target
from lab.servers.nfqueue import DelayQueue, QueueUnavailable
from lab.servers.services import Services
from lab.servers.slow_link import BOTH_WAYS, TO_SERVER, SlowLink, unavailable_reason
from lab.declarations.skips import NotRun

HOLDER_QUEUE, PROBE_QUEUE = 1, 2  # queue numbers inside the trial's namespace: the lock's packets, the probe's
PROBE_ROUND_TRIPS = 5
DELAY_LOWER_SLACK_S = 0.001  # the clock's reads: a round trip may measure this much under the delay
DELAY_UPPER_SLACK_S = 0.02  # and this much over it, plus a twentieth: a process on a busy machine answers late
PROBE_DATAGRAMS = 400
LOSS_SIGMAS = 4.0  # the probe's dropped share must lie within this many binomial standard deviations


# The servers scenarios/slow_network.py starts inside its namespace: every lock service the lab starts a server of.
NAMESPACED_SERVICES = ("postgres", "redis", "redlock", "etcd", "zookeeper")


class SlowNetworkFault(Fault):
    """What the delay and the loss share: the route through the slowed ports, the probe, the proof of the route."""

    label: ClassVar[str]

    def __init__(self, one_way: bool = False):
        self.direction = TO_SERVER if one_way else BOTH_WAYS
        self.link: SlowLink | None = None
        self.inside: Services | None = None  # the servers as the holder reaches them, inside the namespace
        self.lock_ports: list[int] = []
        self.helper: DelayQueue | None = None  # the process in the namespace that holds packets and times the probe
        self.struck = False

    def attach(self, link: SlowLink, inside: Services) -> None:
        """The namespace's rules this fault acts through, and the servers' addresses in that namespace; the scenario
        that made the namespace gives them."""
        self.link, self.inside = link, inside

    def _link(self) -> SlowLink:
        if self.link is None:
            raise FaultNotConfirmed(f"{self.name} has no slowed link: run it through scenarios/slow_network.py")
        return self.link

    def strength_record(self) -> dict:
        """The strength it was made with, as the trial records it."""
        raise NotImplementedError

    def missing(self) -> str | None:
        """Root, iproute2 and iptables, which the slowed link needs (its cells say 'does not run' without them)."""
        return unavailable_reason()

    def _queues(self) -> list[int]:
        """The queue numbers its helper holds packets of: none for a fault that holds nothing."""
        return []

    def applies_to(self, backend_cls) -> str | None:
        if Capability.LEASE_EXPIRY not in backend_cls.capabilities:
            return "its right is no lease with a TTL: there is no renewal for a slow network to make late"
        # The fault would reach the lock's connection in both cases below: what the lab cannot do is *not run*.
        if not backend_cls.lock_routable:
            return NotRun(f"{backend_cls.name} declares that its lock connection cannot be routed through another port")
        if backend_cls.lock_service not in NAMESPACED_SERVICES:
            return NotRun(f"its lock is on {backend_cls.lock_service}, which the lab does not start inside the slow "
                          f"network's namespace")
        return None

    def route(self, services: Services, backend_cls) -> Route:
        """The holder in the namespace, on the servers' addresses there, its lock's through the slowed ports."""
        link, inside = self._link(), self.inside
        if inside is None:
            raise FaultNotConfirmed(f"{self.name} was given no servers inside its namespace")
        if link.namespace.fd is None:
            raise FaultNotConfirmed(f"{self.name}'s namespace is closed")
        self.lock_ports = [link.via(port) for _, port in inside.addresses(backend_cls.lock_service)]
        # The helper starts now, before the holder asks: when the fault strikes, only its rules are left to add, so
        # no renewal slips through in the time a process takes to start.
        self.helper = DelayQueue(self._queues())
        try:
            self.helper.start(link.namespace.fd)
        except QueueUnavailable as exc:
            raise FaultNotConfirmed(f"no packet could be held: {exc}") from None
        assert self.helper.echo_port is not None  # start() read it
        link.watch(self.helper.echo_port)
        return Route(lock_services=inside.routed(backend_cls.lock_service, self.lock_ports), netns=link.namespace.fd,
                     holder_services=inside)

    def inject(self, target: Target) -> None:
        if target.ttl is None:
            raise FaultNotConfirmed(f"{self.name} is sized by the lease's TTL, and the target has none")
        if self.helper is None or self.helper.echo_port is None:
            raise FaultNotConfirmed(f"{self.name} struck with no helper in its namespace: route() first")
        self.struck = True  # from here heal() has something to undo
        self._strike(self._link(), self.helper, target.ttl)

    def _strike(self, link: SlowLink, helper: DelayQueue, ttl: float) -> None:
        raise NotImplementedError

    def confirm(self, target: Target) -> dict:
        link = self._link()
        assert target.ttl is not None and self.helper is not None  # inject() checked and made them
        counts = link.counts()
        before = sum(counts.get(f"seen:{port}", 0) for port in self.lock_ports)
        if before == 0:
            raise FaultNotConfirmed("the holder's lock connection never went through the slowed port")
        evidence = {"fault": self.name, **self.strength_record(), "ttl_s": target.ttl,
                    "direction": "both ways" if self.direction.both_ways else "to the server",
                    "lock_packets_before": before}
        if target.holder is not None:
            evidence["holder_connections"] = link.connections(self.lock_ports).get(target.holder.proc.pid, 0)
        evidence.update(self._measure(link, self.helper, target.ttl))
        return evidence

    def _measure(self, link: SlowLink, helper: DelayQueue, ttl: float) -> dict:
        raise NotImplementedError

    def heal(self, target: Target) -> dict:
        if not self.struck:
            return {}
        self.struck = False
        link = self._link()
        evidence: dict = {}
        try:
            evidence.update(self._during(link.counts()))
            if target.holder is not None:  # a renewal that opened a connection meanwhile shows here
                owners = link.connections(self.lock_ports)
                evidence["holder_connections_at_heal"] = owners.get(target.holder.proc.pid, 0)
        finally:
            link.clear()  # first the rules, then the packets they parked
            report = self.helper.release() if self.helper is not None else {}
        dropped = {q: c for q, c in (report.get("kernel") or {}).items() if c["queue_dropped"] or c["user_dropped"]}
        if report.get("error") or dropped:
            why = report.get("error") or dropped
            raise FaultNotConfirmed(f"the delay dropped packets instead of holding them: {why}")
        evidence.update(self._held(report))
        return evidence

    def close(self) -> None:
        """End the helper whatever happened (a trial that failed before the fault struck never healed)."""
        if self.helper is not None:
            self.helper.release()

    def _during(self, counts: dict[str, int]) -> dict:
        """Evidence of what the rules did to the holder's packets, from their counters before they go."""
        return {}

    def _held(self, report: dict) -> dict:
        """Evidence of what the holding process did, from its report at the release."""
        return {}


class NetDelay(SlowNetworkFault, GradedFault):
    """Every round trip of the holder's lock connections takes strength x TTL more: a graded fault, so the margin
    search (scenarios/margin.py) finds the largest delay a lease survives."""

    name = "net_delay"
    label = "lock connection slowed"
    default_strength = 1 / 3

    def __init__(self, strength: float | None = None, one_way: bool = False):
        """strength: the time added to each round trip, as a fraction of the lease's TTL (0.5: half a TTL; 0: the
        packets pass through the queue unheld). one_way: all of it on the way to the server (requests arrive that
        late); otherwise half each way."""
        super().__init__(one_way)
        self.strength = self.default_strength if strength is None else float(strength)
        if self.strength < 0:
            raise ValueError(f"a delay's strength is a fraction of the TTL, not {strength}")

    def strength_record(self) -> dict:
        return {"strength": self.strength, "strength_of": "round trip added, as a fraction of the TTL"}

    def per_packet_s(self, ttl: float) -> float:
        """How long each packet taken is held: the whole added round trip one way, or half of it each way."""
        return self.strength * ttl / (2 if self.direction.both_ways else 1)

    def _queues(self) -> list[int]:
        return [HOLDER_QUEUE, PROBE_QUEUE]

    def _strike(self, link: SlowLink, helper: DelayQueue, ttl: float) -> None:
        helper.hold(self.per_packet_s(ttl))
        assert helper.echo_port is not None  # started in route()
        link.delay({**{port: HOLDER_QUEUE for port in self.lock_ports}, helper.echo_port: PROBE_QUEUE}, self.direction)

    def _measure(self, link: SlowLink, helper: DelayQueue, ttl: float) -> dict:
        wanted = self.strength * ttl
        trips = helper.round_trips(PROBE_ROUND_TRIPS, 0.01, within_s=1.5 * wanted + 1.0)
        if None in trips:
            raise FaultNotConfirmed(f"the probe's datagrams did not come back through the delay: {trips}")
        measured = statistics.median(t for t in trips if t is not None)
        slack = DELAY_UPPER_SLACK_S + 0.05 * wanted
        evidence = {"configured_rtt_added_s": round(wanted, 4), "held_each_way_s": round(self.per_packet_s(ttl), 4),
                    "probe_rtt_s": trips, "probe_rtt_median_s": measured,
                    "probe_rtt_within_s": [round(wanted - DELAY_LOWER_SLACK_S, 4), round(wanted + slack, 4)]}
        if not wanted - DELAY_LOWER_SLACK_S <= measured <= wanted + slack:
            raise FaultNotConfirmed(f"the probe's round trip was {measured * 1000:.1f} ms through a delay of "
                                    f"{wanted * 1000:.1f} ms (allowed {-DELAY_LOWER_SLACK_S * 1000:.0f} to "
                                    f"+{slack * 1000:.0f} ms)")
        return evidence

    def _during(self, counts: dict[str, int]) -> dict:
        return {"lock_packets_taken": sum(counts.get(f"held:{port}", 0) for port in self.lock_ports)}

    def _held(self, report: dict) -> dict:
        assert self.helper is not None
        return {"lock_packets_held": self.helper.record(HOLDER_QUEUE),
                "probe_packets_held": self.helper.record(PROBE_QUEUE)}


class NetLoss(SlowNetworkFault):
    """Each packet of the holder's lock connections dropped with probability share."""

    name = "net_loss"
    label = "lock connection losing packets"

    def __init__(self, share: float, one_way: bool = False):
        """share: the probability that each packet is dropped (0.3: 30 %). one_way: only those toward the server."""
        super().__init__(one_way)
        if not 0 < share < 1:
            raise ValueError(f"a loss's share is a probability between 0 and 1, not {share}")
        self.share = share

    def strength_record(self) -> dict:
        return {"strength": self.share, "strength_of": "share of packets dropped"}

    def _strike(self, link: SlowLink, helper: DelayQueue, ttl: float) -> None:
        assert helper.echo_port is not None  # started in route()
        link.lose([*self.lock_ports, helper.echo_port], self.share, self.direction)

    def _measure(self, link: SlowLink, helper: DelayQueue, ttl: float) -> dict:
        assert helper.echo_port is not None  # started
        helper.round_trips(PROBE_DATAGRAMS, 0.0005, within_s=0.3)
        counts = link.counts()
        seen, lost = counts.get(f"during:{helper.echo_port}", 0), counts.get(f"lost:{helper.echo_port}", 0)
        if seen < PROBE_DATAGRAMS:
            raise FaultNotConfirmed(f"the drop rule saw {seen} of the probe's {PROBE_DATAGRAMS} datagrams")
        measured = lost / seen
        allowed = LOSS_SIGMAS * math.sqrt(self.share * (1 - self.share) / seen)
        evidence = {"configured_share": self.share, "probe_packets": seen, "probe_dropped": lost,
                    "probe_share": round(measured, 4), "probe_share_within": round(allowed, 4)}
        if abs(measured - self.share) > allowed:
            raise FaultNotConfirmed(f"the drop rule took {measured:.1%} of the probe's packets, configured "
                                    f"{self.share:.0%} (allowed +/-{allowed:.1%})")
        return evidence

    def _during(self, counts: dict[str, int]) -> dict:
        seen = sum(counts.get(f"during:{port}", 0) for port in self.lock_ports)
        lost = sum(counts.get(f"lost:{port}", 0) for port in self.lock_ports)
        return {"lock_packets_during": seen, "lock_packets_dropped": lost,
                "lock_share_dropped": None if not seen else round(lost / seen, 4)}
