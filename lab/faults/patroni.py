"""Faults of a Patroni-managed PostgreSQL (lab/servers/patroni/cluster.py), each confirmed by Patroni's view and the servers'.

- postgres crash: the primary's postmaster is killed (SIGKILL, as the OOM killer does); Patroni either
  restarts it in place (it still holds the leader key) or fails over; which one is recorded.
- agent pause: the primary's Patroni agent is stopped (SIGSTOP) past the leader key's ttl while its
  postgres runs on. The replica's agent takes the key and promotes: two primaries accept writes until the
  old agent is continued, finds its key gone, demotes its postgres and rewinds it (pg_rewind). Nothing
  fences the old postgres meanwhile: there is no /dev/watchdog here.
- DCS cut: the primary's agent loses its etcd (its link to the DCS is blackholed). With failsafe_mode off it
  demotes its own postgres once it cannot renew the key, and the replica promotes when the key expires;
  with failsafe_mode on it asks every member over the REST API, keeps running as primary while they
  answer, and the replica does not promote.
- switchover: a planned switchover to the replica, asked of the leader's REST API as `patronictl
  switchover` does.

Patroni's view is its REST API (`/cluster` from a node that reaches the DCS, `/patroni` of a node); the
servers' view is each postgres' own `pg_is_in_recovery()` and timeline. confirm() waits until both show
the fault's effect, or raises FaultNotConfirmed.
"""

from __future__ import annotations

import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor

import psutil

from lab.faults.base import Fault, FaultNotConfirmed, Target
from lab.servers.abilities import ManagedByPatroni
from lab.servers.patroni.cluster import PatroniCluster, PatroniNode
from lab.servers.proxy import BlackholeProxy

POLL_S = 0.1  # the REST API and pg_is_in_recovery() are asked again at this pace: neither pushes a change
RESTART_WITHIN_S = 60.0  # a crashed primary restarted (or failed over) by then


class PatroniFault(Fault):
    """What every Patroni fault shares: it strikes the cluster's leader and reads both views."""

    strikes = "postgres"
    needs_server = ManagedByPatroni
    no_server = "this fault needs a Patroni cluster the lab started; it never acts on yours"
    cluster: PatroniCluster  # set when the fault strikes (_strike), as is:
    old: PatroniNode  # the leader when the fault struck

    def __init__(self) -> None:
        self.t_fault = 0.0


    def _strike(self, target: Target) -> None:
        """Find the leader (Patroni's view) and note the servers' view before the fault."""
        self.cluster = cluster = target.services.embedded["postgres"]
        leader = cluster.leader()
        if leader is None:
            raise FaultNotConfirmed(f"Patroni names no leader before the fault: {cluster.view()}")
        self.old = leader
        target.evidence.update(leader_before=self.old.name, before={"patroni": cluster.view(),
                                                                      "servers": cluster.servers_view()})
        self.t_fault = time.monotonic()

    def _since(self) -> float:
        return round(time.monotonic() - self.t_fault, 3)

    def _evidence(self, target: Target, **found) -> dict:
        """What confirm() returns: the fault, the leader and both views before it struck, and what it found."""
        return {"fault": self.name, "leader_before": self.old.name, "before": target.evidence["before"], **found}

    def _others(self) -> list[PatroniNode]:
        return [n for n in self.cluster.nodes if n is not self.old]

    def _promoted(self, timeline_before: int) -> tuple[PatroniNode, dict] | None:
        """Another node that Patroni's view (from that node) names leader and whose postgres is out of recovery
        on a later timeline than the old primary's: (node, both views), else None."""
        for node in self._others():
            leader = self.cluster.leader(via=node)
            if leader is not node:
                continue
            state = self.cluster.server_state(node)
            if state.get("in_recovery") is False and (state.get("timeline") or 0) > timeline_before:
                return node, {"patroni": self.cluster.view(via=node), "servers": self.cluster.servers_view()}
        return None

    def _wait_promoted(self, target: Target, within: float) -> tuple[PatroniNode, dict]:
        before = target.evidence["before"]["servers"][self.old.name].get("timeline") or 0
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            found = self._promoted(before)
            if found is not None:
                return found
            time.sleep(POLL_S)
        raise FaultNotConfirmed(f"no other node was promoted within {within:.0f} s: {self.cluster.view()}, "
                                f"{self.cluster.servers_view()}")

    def _agent_pid(self) -> int:
        pid = self.old.patroni_pid
        if pid is None:
            raise FaultNotConfirmed(f"no Patroni agent runs for {self.old.name}")
        return pid


def _running(pid: int) -> bool:
    """Whether pid is a live process (a zombie waiting to be reaped is not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class PatroniPostgresCrash(PatroniFault):
    """The primary's postmaster killed outright; confirmed by its pid gone and a primary again, here or elsewhere."""

    name = "patroni_crash"
    label = "the primary's postgres crashed under Patroni"

    def inject(self, target: Target) -> None:
        self._strike(target)
        pid = self.old.postmaster_pid
        if pid is None:
            raise FaultNotConfirmed(f"{self.old.name} runs no postmaster to crash")
        target.evidence["killed_postmaster"] = pid
        psutil.Process(pid).send_signal(signal.SIGKILL)

    def confirm(self, target: Target) -> dict:
        killed = target.evidence["killed_postmaster"]
        deadline = time.monotonic() + 5.0
        while _running(killed):
            if time.monotonic() > deadline:
                raise FaultNotConfirmed(f"the old postmaster (pid {killed}) still runs 5 s after SIGKILL")
            time.sleep(0.005)  # the kernel has no event for "died" that a non-parent can wait on
        before = target.evidence["before"]["servers"][self.old.name].get("timeline") or 0
        deadline = time.monotonic() + RESTART_WITHIN_S
        while time.monotonic() < deadline:
            promoted = self._promoted(before)
            if promoted is not None:
                node, views = promoted
                return self._evidence(target, patroni_action="failed over", new_primary=node.name,
                                      primary_again_s=self._since(), killed_postmaster=killed, after=views)
            pid = self.old.postmaster_pid
            state = self.cluster.server_state(self.old)
            if (pid is not None and pid != killed and state.get("in_recovery") is False
                    and self.cluster.leader(via=self.old) is self.old):
                return self._evidence(target, patroni_action="restarted in place", new_primary=self.old.name,
                                      primary_again_s=self._since(), killed_postmaster=killed, new_postmaster=pid,
                                      after={"patroni": self.cluster.view(via=self.old),
                                             "servers": self.cluster.servers_view()})
            time.sleep(POLL_S)
        raise FaultNotConfirmed(f"no primary within {RESTART_WITHIN_S:.0f} s of the crash: {self.cluster.view()}")


class PatroniAgentPause(PatroniFault):
    """The primary's Patroni agent SIGSTOPped until the replica is promoted; confirmed by state T and two primaries."""

    name = "patroni_agent_pause"
    label = "the primary's Patroni agent paused past its ttl"

    stopped: int | None = None  # the agent's pid while it is stopped, None once it runs again

    def inject(self, target: Target) -> None:
        self._strike(target)
        pid = self._agent_pid()
        psutil.Process(pid).send_signal(signal.SIGSTOP)
        self.stopped = pid

    def confirm(self, target: Target) -> dict:
        assert self.stopped is not None  # inject() stopped it or raised
        deadline = time.monotonic() + 5.0
        while (state := psutil.Process(self.stopped).status()) != psutil.STATUS_STOPPED:
            if time.monotonic() > deadline:
                raise FaultNotConfirmed(f"the agent (pid {self.stopped}) is in state {state}, not stopped, 5 s "
                                        "after SIGSTOP")
            time.sleep(0.005)  # the kernel has no event for "stopped": its state is polled
        settings = self.cluster.settings
        node, views = self._wait_promoted(target, settings.ttl + settings.loop_wait + 30)
        old_state = views["servers"][self.old.name]
        # The old primary's postgres still out of recovery beside the new one: a split brain.
        return self._evidence(target, agent_pid=self.stopped, agent_state="T", new_primary=node.name,
                              promoted_after_s=self._since(), after=views,
                              two_primaries=old_state.get("in_recovery") is False)

    def heal(self, target: Target) -> dict:
        if self.stopped is None:
            return {}
        pid, self.stopped = self.stopped, None
        try:
            psutil.Process(pid).send_signal(signal.SIGCONT)
        except psutil.NoSuchProcess:
            return {"agent_continued": False}
        return {"agent_continued": True}


class PatroniDcsCut(PatroniFault):
    """The primary's agent cut from etcd; confirmed by its link relaying nothing, its agent no longer reaching the
    DCS (its REST status's dcs_last_seen stops), and by what Patroni then did, recorded as found: the old primary
    demoted and another promoted, or (failsafe_mode) the old one still primary past the ttl with nobody promoted."""

    name = "patroni_dcs_cut"
    label = "the primary cut from the DCS"

    link: BlackholeProxy | None = None  # the agent's DCS link, once cut

    def inject(self, target: Target) -> None:
        self._strike(target)
        self.link = self.old.dcs_link
        if self.link is None:
            raise FaultNotConfirmed(f"{self.old.name} has no DCS link to cut")
        target.evidence["dcs_bytes_before_cut"] = self.link.relayed_bytes()
        self.link.blackhole()

    def confirm(self, target: Target) -> dict:
        assert self.link is not None  # inject() cut it or raised
        link, settings = self.link, self.cluster.settings
        carried = target.evidence["dcs_bytes_before_cut"]
        if carried == 0:
            raise FaultNotConfirmed("the agent's DCS link had carried nothing before the cut")
        before = target.evidence["before"]["servers"][self.old.name].get("timeline") or 0
        held_for = settings.ttl + settings.loop_wait + 5  # the leader key expired a loop ago: nobody took it
        deadline = self.t_fault + settings.ttl + settings.loop_wait + 30
        found: dict | None = None
        while found is None and time.monotonic() < deadline:
            promoted = self._promoted(before)
            if promoted is not None:
                node, views = promoted
                found = {"patroni_action": "failed over", "new_primary": node.name, "promoted_after_s": self._since(),
                         "old_primary_demoted": views["servers"][self.old.name].get("in_recovery") is not False,
                         "after": views}
            elif time.monotonic() >= self.t_fault + held_for:
                found = self._still_primary()
            if found is None:
                time.sleep(POLL_S)
        if found is None:
            raise FaultNotConfirmed(f"{held_for} s after the cut nobody was promoted, and {self.old.name} was not "
                                    f"primary either: {self.cluster.view()}, {self.cluster.servers_view()}")
        during = link.relayed_bytes() - carried
        if during:
            raise FaultNotConfirmed(f"the cut DCS link still relayed {during} bytes")
        status, answer = self.old.rest("/patroni")
        last_seen = float(answer.get("dcs_last_seen") or 0) if status == 200 else None
        return self._evidence(target, failsafe_mode=settings.failsafe_mode, dcs_bytes_before_cut=carried,
                              dcs_bytes_during_cut=during, failsafe_mode_is_active=answer.get("failsafe_mode_is_active"),
                              dcs_last_seen_s_ago=None if not last_seen else round(time.time() - last_seen, 1),
                              **found)

    def _still_primary(self) -> dict | None:
        """The old primary still the only primary, by Patroni's view of itself (its REST role) and the servers'."""
        status, answer = self.old.rest("/patroni")
        servers = self.cluster.servers_view()
        primaries = [name for name, state in servers.items() if state.get("in_recovery") is False]
        if status != 200 or answer.get("role") not in ("primary", "master") or primaries != [self.old.name]:
            return None
        return {"patroni_action": "kept the primary", "new_primary": None, "held_primary_s": self._since(),
                "old_primary_demoted": False,
                "after": {"patroni": self.cluster.view(via=self._others()[0]), "servers": servers}}

    def heal(self, target: Target) -> dict:
        if self.link is not None and self.link.blackholed:
            self.link.restore()
            return {"dcs_link_restored": True}
        return {}


class PatroniSwitchover(PatroniFault):
    """A planned switchover to the replica; confirmed by Patroni naming it leader and its postgres out of recovery."""

    name = "patroni_switchover"
    label = "a planned Patroni switchover"

    asked: Future | None = None  # the switchover, asked and running meanwhile

    def inject(self, target: Target) -> None:
        """Ask for the switchover and return at once: it takes seconds, and the old primary's behaviour meanwhile
        is part of what the trial measures."""
        self._strike(target)
        candidate = self._others()[0]
        pool = ThreadPoolExecutor(1, thread_name_prefix="switchover")
        self.asked = pool.submit(self.cluster.switchover, self.old, candidate)
        pool.shutdown(wait=False)  # the request runs on; its thread ends with it
        target.evidence["switchover"] = {"candidate": candidate.name}

    def confirm(self, target: Target) -> dict:
        assert self.asked is not None  # inject() asked
        status, answer = self.asked.result(timeout=90)
        asked = {**target.evidence["switchover"], "status": status, "said": answer.get("text") or answer.get("error")}
        if asked["status"] != 200:
            raise FaultNotConfirmed(f"the REST API refused the switchover: {asked['status']} {asked['said']}")
        node, views = self._wait_promoted(target, 30)
        return self._evidence(target, new_primary=node.name, promoted_after_s=self._since(), switchover=asked,
                              after=views)
