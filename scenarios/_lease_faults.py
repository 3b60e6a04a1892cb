"""One trial shape for the faults that break leases: a holder hit mid-run, a contender, then the holder's write.

The holder (its own OS process) takes the lock and stops at its fault point:
before its write for a lock held across writes, inside the write (after the
delete) for a lock that lives in the write. The fault strikes (pause, cut,
restart) for longer than the TTL; a contender then tries to take the company and
rebuild it; the fault heals and the holder goes on to write. Whether the holder's
write is accepted after the contender took over is the measurement.

The holder's PostgreSQL sessions carry the post's guard, idle_in_transaction_session_timeout
of one TTL, as a database with that setting would give them.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from urllib.parse import urlparse

import backends
from lab.checkers import company_state, lease_verdict
from lab.errors import LabError
from lab.holder import HolderProcess
from lab.job import run_job
from lab.proxy import BlackholeProxy
from lab.signals import signals
from lab.workload import COMPANY_SIZE
from scenarios.base import Scenario, Skip, TrialEnv

COMPANY = 1
HEAL_GRACE_S = 0.3  # after the TTL, before the contender tries: clocks and timers are not exact


def lock_service(backend_cls) -> str:
    """Which server the backend's lock lives on."""
    for service in ("redis", "etcd", "redlock"):
        if service in backend_cls.services:
            return service
    return "postgres"


def lock_has_own_connection(backend_cls) -> bool:
    """True when the lock is held across writes on a connection of its own (not inside the write)."""
    return bool({"session_lock", "lease_expiry"} & backend_cls.capabilities)


def lock_addresses(env: TrialEnv, service: str) -> list[tuple[str, int]]:
    """host:port of every server holding the lock (three for Redlock)."""
    if service == "postgres":
        return [(env.services.pg_url.host, env.services.pg_url.port)]
    if service in ("redis", "redlock"):
        urls = [env.services.redis_url] if service == "redis" else env.services.redlock_urls
        return [(urlparse(u).hostname, urlparse(u).port or 6379) for u in urls]
    host, _, port = env.services.etcd_endpoint.rpartition(":")
    return [(host, int(port))]


def proxied_spec(env: TrialEnv, service: str, ports: list[int], own_connection: bool) -> dict:
    """Spec changes that route the holder's lock connections through the proxies."""
    if service == "redis":
        return {"options": {"lock_redis_url": f"redis://127.0.0.1:{ports[0]}/0"}}
    if service == "redlock":
        return {"options": {"lock_redlock_urls": [f"redis://127.0.0.1:{p}/0" for p in ports]}}
    if service == "etcd":
        return {"options": {"lock_etcd_endpoint": f"127.0.0.1:{ports[0]}"}}
    proxied = env.services.pg_url.set(host="127.0.0.1", port=ports[0]).render_as_string(hide_password=False)
    # A session lock or lease row has its own connection; a lock inside the write travels with the write.
    return {"options": {"lock_pg_url": proxied}} if own_connection else {"writes_dsn": proxied}


def lease_fault_trial(env: TrialEnv, fault: str) -> dict:
    cls = backends.load(env.spec.backend)
    service = lock_service(cls)
    if fault == "restart" and not env.services.is_embedded(service):
        raise Skip(f"restart needs a {service} server the lab started; it never restarts yours")
    ttl = env.params["ttl_s"]
    own_connection = lock_has_own_connection(cls)
    table = env.table()
    table.seed(env.writes, COMPANY, COMPANY_SIZE)
    guard = {"idle_in_transaction_session_timeout": f"{int(ttl * 1000)}ms"}
    spec = {"backend": cls.name, "backend_entry": backends.entry(cls.name), "key": env.key(), "options": {"ttl_s": ttl}, "lock_settings": guard,
            "write_settings": guard, "pg_dsn": env.services.pg_url.render_as_string(hide_password=False),
            "redis_url": env.services.redis_url, "etcd_endpoint": env.services.etcd_endpoint,
            "redlock_urls": env.services.redlock_urls,
            "table": table.name, "company": COMPANY, "rows": COMPANY_SIZE, "run_id": "holder",
            "fault_point": "before_write" if own_connection else "after_delete",
            "mode": "stop" if fault == "pause" else "wait"}
    proxies = [BlackholeProxy(*a).start() for a in lock_addresses(env, service)] if fault == "cut" else []
    if proxies:
        change = proxied_spec(env, service, [p.port for p in proxies], own_connection)
        spec["options"].update(change.get("options", {}))
        spec.update({k: v for k, v in change.items() if k != "options"})
    holder = HolderProcess(spec)
    contender = env.backend(table=table, options={"ttl_s": ttl}, key=spec["key"])
    pool = ThreadPoolExecutor(1)
    try:
        acquired = holder.wait_for("acquire", 30)
        if not acquired["granted"]:
            raise LabError("the holder could not take a fresh lock")
        effective_ttl = float(acquired.get("ttl") or ttl)
        holder.wait_for("at_point", 30)
        t_fault = time.monotonic()
        if fault == "pause":
            holder.wait_stopped()
        elif fault == "cut":
            for proxy in proxies:
                proxy.blackhole()
        else:
            env.services.restart(service)
        # Until one TTL (plus grace) after the fault struck: a restart itself takes part of that time.
        env.pause(max(0.0, t_fault + effective_ttl + HEAL_GRACE_S - time.monotonic()))
        # The contender keeps trying for one more TTL; the fault heals once it is in or has given up
        # (a lock inside a live transaction keeps it waiting, and then it goes in only after the heal).
        patience = effective_ttl + 1.0
        other = pool.submit(run_job, contender, [COMPANY], COMPANY_SIZE, "contender", patience=patience)
        wait([other], timeout=patience + 0.5)
        t_heal = time.monotonic()
        if fault == "pause":
            holder.resume()
        elif fault == "cut":
            for proxy in proxies:
                proxy.restore()
        if fault != "pause":
            holder.go()
        events = holder.finish(timeout=30 + 3 * effective_ttl)
        job = other.result(timeout=30 + 3 * effective_ttl)
    finally:
        holder.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        contender.close()
        for proxy in proxies:
            proxy.stop()
    measures = _measures(events, job, table, env, fault, spec["fault_point"], t_fault, t_heal, effective_ttl)
    measures["contender"]["token"] = getattr(contender, "token", None)
    return measures


def _measures(events, job, table, env, fault, point, t_fault, t_heal, ttl) -> dict:
    by_name = {e["event"]: e for e in events}
    t0 = by_name["acquire"]["t"]
    write = by_name.get("write", {})
    contender_rebuild = job.rebuilds[0] if job.rebuilds else None
    # The contender got in when its rebuild committed; its job ends right after that commit.
    got_in = job.acquired and (contender_rebuild is not None and contender_rebuild.outcome == "committed")
    contender_in_at = job.ended if got_in else None
    with env.writes.connect() as conn:
        rows_final, runs_in = table.count(conn, COMPANY), table.runs_in(conn, COMPANY)
    holder_write_at = write.get("t") or by_name.get("exit", {}).get("t")
    noticed = by_name.get("held", {}).get("noticed_loss_at")
    return {
        "fault": fault, "point": point, "ttl_s": ttl,
        "fault_at": round(t_fault - t0, 3), "healed_at": round(t_heal - t0, 3),
        "holder": {"token": by_name["acquire"].get("token"), "write": write.get("outcome", "none"),
                   "write_error": write.get("error") or by_name.get("error", {}).get("error"),
                   "write_at": None if holder_write_at is None else round(holder_write_at - t0, 3),
                   "held_after": by_name.get("held", {}).get("held"),
                   "noticed_loss_at": None if noticed is None else round(noticed - t0, 3),
                   "release": by_name.get("release", {}).get("result"),
                   "signals": signals(events, t0)},
        "contender": {"acquired": job.acquired, "write": contender_rebuild.outcome if contender_rebuild else "none",
                      "granted_at": None if job.granted_at is None else round(job.granted_at - t0, 3),
                      "in_at": None if contender_in_at is None else round(contender_in_at - t0, 3)},
        "lost": bool(got_in and holder_write_at is not None and contender_in_at < holder_write_at),
        "rows": COMPANY_SIZE, "rows_final": rows_final, "runs_in_final": runs_in,
        "company": company_state(COMPANY_SIZE, rows_final, runs_in),
    }


class LeaseFaultScenario(Scenario):
    """A scenario that is this trial shape with one fault; subclasses name the fault and their scales."""

    fault: str

    def run_trial(self, env: TrialEnv) -> dict:
        return lease_fault_trial(env, self.fault)

    def verdict(self, measures: dict) -> str:
        return lease_verdict(measures["lost"], measures["holder"]["write"])
