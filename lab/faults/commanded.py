"""A failover, pause or partition performed by the user's own cluster manager on servers the lab did not start.

The lab runs the user's `--fault-command failover=CMD` (or pause=CMD, partition=CMD) at the fault's
moment and confirms it over the servers' own protocols: a new primary or leader
(lab/servers/identity.py: the node a read-write PostgreSQL session lands on and its timeline, the
address a majority of Sentinels give and that server's ROLE and run_id, etcd's leader id). A pause
or a partition must be undone: it needs `heal=CMD` too, which runs when the trial heals and is
confirmed by a primary answering and the old one answering again (for a Redis behind Sentinel: taken
back as a replica, the Sentinels' own repair; for a PostgreSQL of several hosts: beside exactly one
primary, the old one demoted or rewound by its manager, so no split brain is left). A command that fails, or leaves the same primary
answering, makes the trial an error. Every lock service reads the same way, so one such fault serves
Patroni, Sentinel, an etcd cluster or Kubernetes alike; the scenario decides which lock it strikes.

For a Redis lock a PromotionWatch records the promotion measures, its probe writing straight to the
old primary's address with the service's credentials (a PostgreSQL lock's scenario runs lab/measures/promotion.py's
PromotionProbe itself). A failover of the user's service reaches every trial on it, so each scenario
runs these trials one at a time, under ONE_AT_A_TIME.
"""

from __future__ import annotations

import threading
import time
from typing import ClassVar

from lab.faults.base import Fault, FaultNotConfirmed, Target
from lab.faults.commands import Hook, run_fault_command
from lab.servers.clients import is_sentinel_url, parse_sentinel_url, redact_text, server_url
from lab.servers.identity import is_new_primary, old_primary_answer, primary_identity
from lab.servers.redis.promotion import PromotionWatch, straight_to
from lab.servers.services import Services
from lab.declarations.skips import NotRun

NEW_PRIMARY_WITHIN = 60.0  # from the command's end: a manager's own timers (a TTL, down-after) come first
RESTORED_WITHIN = 60.0  # from the heal command's end: Sentinel takes an old primary back only after ~10 s
ONE_AT_A_TIME = threading.Lock()  # held by a trial of a commanded fault, in any scenario, from start to end
OLD_BACK_WITHIN = 20.0  # after a failover, how long the old primary's return is waited for before it is recorded as gone


class CommandedFault(Fault):
    """The user's command for hook; subclasses name the hook. heal() runs heal=CMD when the hook needs one."""

    commandable = True
    hook: ClassVar[Hook]
    needs_heal: ClassVar[bool] = False
    label = "your command"

    def __init__(self) -> None:
        self.before: dict | None = None
        self.injected = False
        self.healed = False
        self.t_fault: float | None = None
        self.t_healed: float | None = None
        self.watch: PromotionWatch | None = None

    def cannot_run(self, backend_cls, services: Services) -> str | None:
        reason = self.applies_to(backend_cls)
        if reason is not None:
            return reason
        service = backend_cls.lock_service
        needed = [self.hook.value] + ([Hook.HEAL.value] if self.needs_heal else [])
        if services.is_embedded(service):
            return NotRun(f"it runs your {'/'.join(needed)} command on servers the lab did not start")
        missing = [h for h in needed if h not in services.fault_commands]
        if missing:
            return NotRun("on servers the lab did not start it runs your command: give "
                          + " and ".join(f"--fault-command {h}=CMD" for h in needed))
        return None

    def inject(self, target: Target) -> None:
        service = target.backend_cls.lock_service
        self.before = self._identity(target.services, service, "before the command")
        self.t_fault = time.monotonic()
        if service == "redis":
            self.watch = self._watch(target.services, self.before)
            self.watch.start(self.t_fault)
        self.injected = True
        target.evidence["command_exit"] = run_fault_command(target.services, self.hook.value, service)
        target.evidence["command_s"] = round(time.monotonic() - self.t_fault, 3)
        if self.watch is not None:
            self.watch.struck()

    @staticmethod
    def _identity(services: Services, service: str, when: str) -> dict:
        try:
            return primary_identity(services, service)
        except Exception as exc:  # no primary answered: nothing to compare a failover with
            raise FaultNotConfirmed(f"{service} named no primary {when}: {redact_text(str(exc))[:200]}") from None

    def _watch(self, services: Services, before: dict) -> PromotionWatch:
        """The promotion measures of a Redis lock: a probe straight to the old primary, asked whether another
        primary answers now."""
        url = services.redis()
        host, _, port = before["address"].rpartition(":")
        old = server_url(parse_sentinel_url(url), host, int(port)) if is_sentinel_url(url) else url
        manager = "sentinel" if is_sentinel_url(url) else "your command"

        def promoted() -> bool:
            return is_new_primary(before, primary_identity(services, "redis"), "redis")

        return PromotionWatch(f"{manager} ({self.hook.value} command)", old_primary=lambda: straight_to(old),
                              promoted=promoted, key_prefix="locklab:probe")

    def confirm(self, target: Target) -> dict:
        service = target.backend_cls.lock_service
        before = self.before or {}
        deadline, after, why = time.monotonic() + NEW_PRIMARY_WITHIN, None, None
        while time.monotonic() < deadline:
            try:
                after = primary_identity(target.services, service)
                if is_new_primary(before, after, service):
                    return {"fault": self.name, "hook": self.hook.value, "service": service,
                            "command": redact_text(target.services.fault_commands[self.hook.value]),
                            "command_exit": target.evidence.get("command_exit"),
                            "command_s": target.evidence.get("command_s"),
                            "new_primary_after_s": round(time.monotonic() - (self.t_fault or 0.0), 3),
                            "primary_before": before, "primary_after": after}
            except Exception as exc:  # between primaries nothing may answer: ask again
                why = redact_text(str(exc))[:200]
            time.sleep(0.1)  # no event announces a new primary to a client: ask again
        raise FaultNotConfirmed(f"after the {self.hook.value} command {service} " + (
            f"still has the same primary ({after})" if after is not None else f"named no primary: {why}")
            + f" within {NEW_PRIMARY_WITHIN:.0f} s")

    def heal(self, target: Target) -> dict:
        """heal=CMD once, for a hook that needs it, confirmed by a primary answering and the old one back."""
        if not self.needs_heal or not self.injected or self.healed:
            if self.t_healed is None and self.injected:
                self.t_healed = time.monotonic()
            return {}
        self.healed = True
        service = target.backend_cls.lock_service
        exit_code = run_fault_command(target.services, Hook.HEAL.value, service)
        self.t_healed = time.monotonic()
        return {"heal_command": redact_text(target.services.fault_commands[Hook.HEAL.value]),
                "heal_command_exit": exit_code, **self.restored(target.services, service)}

    def restored(self, services: Services, service: str, *, require_old: bool = True) -> dict:
        """Until a primary answers and the old primary answers again at its own address (a Redis behind Sentinel:
        as a replica, taken back by the Sentinels); FaultNotConfirmed when not within RESTORED_WITHIN. Without
        require_old (after a failover, whose old primary may be gone for good: a deleted pod) only a primary
        must answer, and the old one is waited for a shorter while and recorded as it was."""
        before = self.before or {}
        within = RESTORED_WITHIN if require_old else OLD_BACK_WITHIN
        deadline, seen, now = time.monotonic() + within, "nothing", None
        while time.monotonic() < deadline:
            try:
                now = primary_identity(services, service)
                old = old_primary_answer(services, service, before)
                if _taken_back(services, service, now, old):
                    return {"restored_after_s": round(time.monotonic() - (self.t_healed or time.monotonic()), 3),
                            "primary_after_heal": now, "old_primary_after_heal": old}
                seen = f"the old primary answers {old}" + (f", beside the primary {now}" if service == "postgres" else "")
            except Exception as exc:  # not back yet: ask again
                seen = redact_text(str(exc))[:200]
            time.sleep(0.2)
        if not require_old and now is not None:
            return {"restored_after_s": None, "primary_after_heal": now, "old_primary_after_heal": seen}
        raise FaultNotConfirmed(f"after the {'heal' if require_old else self.hook.value} command {service} was not "
                                f"restored within {within:.0f} s: {seen}")

    def settle(self, services: Services, service: str) -> tuple[dict, dict | None]:
        """After the trial: for a hook without a heal, the same restoration (the manager's own repair); then the
        promotion measures (None for a lock that is not on Redis)."""
        evidence: dict = {}
        if not self.needs_heal and self.before is not None:
            evidence = self.restored(services, service, require_old=False)
        if self.watch is None:
            return evidence, None
        self.watch.wait_probe_ended(2.0)

        def final_primary():
            now = primary_identity(services, "redis")
            host, _, port = now["address"].rpartition(":")
            url = services.redis()
            return straight_to(server_url(parse_sentinel_url(url), host, int(port)) if is_sentinel_url(url) else url,
                               5.0)

        return {**evidence, **self.watch.evidence()}, self.watch.result(final_primary)

    def stop_watch(self) -> None:
        if self.watch is not None:
            self.watch.stop()


def _taken_back(services: Services, service: str, now: dict, old: dict) -> bool:
    """Whether the old primary, answering again, is back as its manager leaves it: behind Sentinel, a replica; on
    a PostgreSQL of several hosts, beside no other primary (a split brain's old primary still takes writes until
    its agent demotes it, and a final table read then could land on either)."""
    if service == "redis" and is_sentinel_url(services.redis()):
        return old.get("role") == "slave"
    if service == "postgres":
        return len(now.get("primaries", [now["address"]])) == 1
    return True


class CommandedFailover(CommandedFault):
    name = "commanded_failover"
    hook = Hook.FAILOVER
    label = "your failover command"


class CommandedPause(CommandedFault):
    name = "commanded_pause"
    hook = Hook.PAUSE
    needs_heal = True
    label = "your pause command"


class CommandedPartition(CommandedFault):
    name = "commanded_partition"
    hook = Hook.PARTITION
    needs_heal = True
    label = "your partition command"


__all__ = ["ONE_AT_A_TIME", "CommandedFault", "CommandedFailover", "CommandedPause", "CommandedPartition"]
