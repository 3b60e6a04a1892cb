"""A real network drop under a PostgreSQL session lock: when the server frees it, and what the holder learns.

The post computes its "two hours" from keepalive defaults; this measures it. Each trial runs a
PostgreSQL of its own inside a private network namespace (lab/servers/netns.py), the holder with it.
The holder takes its session lock and stops before its write; its lock connection is then dropped
(lab/faults/net_drop.py: no FIN, no RST, keepalive probes unanswered) while its write sessions stay
up. The lab waits for the server to end the lock's session and compares the time with the figure
`lab doctor` computes from the same settings (lab/servers/postgres/sql.py keepalive_estimate). A contender then
asks for the company; the holder writes, asks held() on its dropped connection, and releases.

Variants (the server's tcp_keepalives_idle/interval/count tuned, the post's guard off, in all but the last):
- server_keepalives: the holder's libpq connection as it comes (keepalives on, at the OS defaults).
- client_keepalives: the holder's connection with libpq keepalives_idle/interval/count tuned too.
- client_user_timeout: the holder's connection with libpq tcp_user_timeout.
- os_defaults: the server's keepalives left at 0 (the OS's 7200 s + 9 x 75 s): over two hours a
  trial, so in the full profile only.
"""

from __future__ import annotations

import functools
import shutil
import time
from dataclasses import replace
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url

import backends
from lab import faults
from lab.declarations.capabilities import Capability
from lab.checkers.keepalive import ends_as_estimated
from lab.checkers.ops import Recorder
from lab.checkers.outcomes import DoesNotRun, NotRun
from lab.checkers.verdict import Verdict
from lab.declarations.columns import Column, FaultFamily
from lab.errors import Interrupted, LabError
from lab.faults import Target
from lab.faults.net_drop import NetDrop as DropFault
from lab.holder.process import HolderProcess
from lab.measures.kinds import Measured
from lab.measures.shapes import NetDropMeasures
from lab.declarations.pacing import Floor, Lane, Pacing
from lab.servers.kernel_timers import WORST_FRACTION, keepalive_lateness_s, measure_hz
from lab.servers.netns import NetNamespace, unavailable_reason
from lab.servers.postgres import sql as pg
from lab.servers.postgres.server import EmbeddedPostgres, template_for
from lab.servers.postgres.sql import KEEPALIVE_SQL, dispose, keepalive_estimate, trial_engines
from lab.workload.job import run_job
from lab.workload.table import COMPANY_SIZE, ensure_schema
from scenarios._lease_faults import COMPANY, holder_measures
from scenarios._trial_folders import private_namespace, shared_folder
from scenarios.base import Scenario, Skip, TrialEnv, judged

GUARDS_OFF = {"idle_in_transaction_session_timeout": "0", "idle_session_timeout": "0"}  # only the network ends it
WAIT_MARGIN_S = 5.0  # past the doctor's figure (and two probe intervals), the wait for the session's end gives up


# The libpq parameters each variant sets on the holder's lock connection (client_settings gives their values).
CLIENT_PARAMETERS = {"client_keepalives": ("keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count"),
                     "client_user_timeout": ("tcp_user_timeout",)}


def client_settings(variant: str, params: dict) -> dict[str, str]:
    """The libpq parameters of the holder's lock connection in this variant."""
    if variant == "client_keepalives":
        idle, interval, count = params["client_keepalives"]
        return {"keepalives": "1", "keepalives_idle": str(idle), "keepalives_interval": str(interval),
                "keepalives_count": str(count)}
    if variant == "client_user_timeout":
        return {"tcp_user_timeout": str(params["user_timeout_ms"])}
    return {}


def server_settings(variant: str, params: dict) -> dict[str, int]:
    idle, interval, count = (0, 0, 0) if variant == "os_defaults" else params["server_keepalives"]
    return {"tcp_keepalives_idle": idle, "tcp_keepalives_interval": interval, "tcp_keepalives_count": count}


class NetDrop(Scenario):
    name = "netdrop"
    measured = Measured.KEEPALIVE_DROP
    # A server of each trial's own, in its own namespace: runs beside the others. Its floor is its own: its timers
    # are the server's keepalives, from its parameters (own_floor).
    pacing = Pacing(lane=Lane.OWN_SERVERS, floor=Floor.OWN)
    fault = "net_drop"
    summary = ("the holder's lock connection dropped on the network (no FIN, no RST): when the server's keepalives "
               "free the lock, against lab doctor's figure, and what client keepalives or tcp_user_timeout tell it")
    variants = ("server_keepalives", "client_keepalives", "client_user_timeout", "os_defaults")
    title = "lock connection dropped on the network"
    columns = (
        Column("server_keepalives", "lock connection dropped on the network (keepalives tuned)", 22,
               "the lock connection's packets dropped in a private network namespace (no FIN, no RST) while the "
               "server's keepalives are tuned short; confirmed by the dropped port being the lock session's and "
               "the server ending it",
               family=FaultFamily.NETWORK, happens_when=(), strikes=("postgres",), needs=(Capability.SESSION_LOCK,)),
    )
    params = {
        "quick": {"trials": 1, "parallel": 3, "server_keepalives": [2, 1, 2], "client_keepalives": [1, 1, 2],
                  "user_timeout_ms": 1500, "holder_patience_s": 4.0,
                  "variants": ["server_keepalives", "client_keepalives", "client_user_timeout"]},
        # Six at once: a trial sits on kernel keepalive timers for 8-17 s, and with three at once the
        # machine was 20-50% busy while they ran (run 193d).
        "default": {"trials": 3, "parallel": 6, "server_keepalives": [5, 1, 3], "client_keepalives": [2, 1, 2],
                    "user_timeout_ms": 2000, "holder_patience_s": 6.0,
                    "variants": ["server_keepalives", "client_keepalives", "client_user_timeout"]},
        "full": {"trials": 2, "parallel": 12, "server_keepalives": [5, 1, 3], "client_keepalives": [2, 1, 2],
                 "user_timeout_ms": 2000, "holder_patience_s": 6.0, "variants": list(variants)},
    }

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        reason = faults.load(self.fault).applies_to(backend_cls)
        taken = backend_cls.pg_parameters
        missing = [p for p in CLIENT_PARAMETERS.get(variant, ()) if taken is not None and p not in taken]
        if reason is None and missing:  # a client that is not libpq (node-postgres): the lab cannot set them there
            return NotRun(f"its lock's client takes none of libpq's {', '.join(missing)}")
        return reason

    def pg_sessions(self, backend_cls, profile: str) -> int:
        return 0  # every session of a trial is on the trial's own server

    def own_floor(self, profile: str) -> float:
        """The floor its pacing declares as its own (Floor.OWN), a hook because it reads the keepalive parameters:
        its timers are the server's keepalives, so a trial waits at least until the server can have noticed the
        dropped client (idle + interval x count), the soonest of its variants."""
        p = self.profile_params(profile)
        return float(min(keepalive_estimate(server_settings(v, p))[0] for v in p["variants"]))

    def trial_seconds(self, profile: str) -> float:
        p = self.profile_params(profile)
        worst = max(keepalive_estimate(server_settings(v, p))[0] for v in p["variants"])
        return 3.0 + worst * (1 + WORST_FRACTION) + p["holder_patience_s"]

    def run_trial(self, env: TrialEnv) -> dict:
        reason = unavailable_reason()
        if reason is not None:
            raise Skip(DoesNotRun(reason))
        run_server = env.services.embedded.get("postgres")
        if run_server is None:
            raise Skip(NotRun("drops packets only around a server the lab starts, in a namespace of its own; "
                              "it never touches your network"))
        namespace = private_namespace()
        root = shared_folder(env.services.tmp, "netdrop-")
        try:
            return namespace.run(_trial_inside, env, namespace, root, run_server.bin)
        finally:
            namespace.allow_all()
            namespace.close()
            shutil.rmtree(root, ignore_errors=True)

    def judge(self, measures: dict, backend_cls) -> Verdict:
        """The checkers over the holder's, the contender's and the drop's operations: a session the server never
        ended kept its lock (the contender was refused, held), one it ended let the contender in."""
        return judged(measures, backend_cls)


def _trial_inside(env: TrialEnv, namespace: NetNamespace, root: Path, bin_dir: Path) -> dict:
    """The trial, on a thread inside the namespace: its server, clients and holder are all there."""
    cls = backends.load(env.spec.backend)
    p, variant = env.params, env.spec.variant
    template = template_for(bin_dir, env.services.tmp) if env.services.tmp else None
    server = EmbeddedPostgres(root, bin_dir=bin_dir, settings={**server_settings(variant, p), **GUARDS_OFF},
                              netns=namespace.fd, name="netdrop", template=template)
    monitor = writes = holder = contender = target = None
    fault = DropFault(namespace, server.port)
    try:
        server.start()
        url = make_url(server.dsn)
        services = replace(env.services, pg_url=url, embedded={"postgres": server}, tmp=None)
        monitor, writes = trial_engines(url)
        ensure_schema(monitor)
        backends.prepare_storage(monitor, [cls.name])
        inside = replace(env, services=services, monitor=monitor, writes=writes)
        with monitor.connect() as conn:
            values = {r.name: int(r.setting) for r in conn.execute(text(KEEPALIVE_SQL))}
        estimate, idle, interval, count = keepalive_estimate(values)
        hz = _kernel_hz()
        late = round(keepalive_lateness_s(idle, interval, count, hz), 3)  # the kernel's timers fire up to this late
        within = estimate + late + 2 * interval + WAIT_MARGIN_S
        table = inside.table()
        table.seed(writes, COMPANY, COMPANY_SIZE)
        client = client_settings(variant, p)
        routed = replace(services, pg_url=url.update_query_dict(client), embedded={}, tmp=None)
        spec = {"backend": cls.name, "backend_entry": backends.entry(cls.name), "key": inside.key(),
                "options": inside.options(), "lock_settings": GUARDS_OFF, "write_settings": GUARDS_OFF,
                **services.to_addresses(), "lock_addresses": routed.to_addresses(),
                "table": table.name, "company": COMPANY, "rows": COMPANY_SIZE, "run_id": "holder",
                "fault_point": "before_write"}
        history = Recorder()
        holder = HolderProcess(spec, netns=namespace.fd)
        acquired = holder.wait_for("acquire", 30)
        if not acquired["granted"]:
            raise LabError("the holder could not take a fresh lock")
        at_point = holder.wait_for("at_point", 30)
        target = Target(services, monitor, cls, holder=holder, lock_pid=acquired.get("lock_pid"),
                        write_pid=at_point.get("write_pid"))
        fault.inject(target)
        evidence = fault.confirm(target)  # FaultNotConfirmed makes this trial an error, never a verdict
        t_drop = fault.dropped_at
        assert t_drop is not None  # inject() set it, or raised
        t_gone = _wait_gone(env, monitor, target.lock_pid, within=within)
        contender = inside.backend(table=table, key=spec["key"])
        job = run_job(contender, [COMPANY], COMPANY_SIZE, "contender", patience=1.0, history=history)
        t_go = time.monotonic()
        holder.go()
        learned = _holder_learns(holder, p["holder_patience_s"])
        # Read before the heal, which takes the drop (and its counters) away; a session that never ended must
        # still show dropped probes, or the trial is an error rather than a "held".
        evidence.update(fault.struck(target, server.log_path.read_text(errors="replace")))
        t_heal = time.monotonic()
        fault.heal(target)
        events = holder.finish(timeout=10)
        base = holder_measures(events, job, table, inside, fault.name, "before_write", t_drop, t_heal, estimate,
                               history)  # reads the table: while the server is up
    finally:
        if target is not None:
            fault.heal(target)
        if holder is not None:
            holder.kill()
        if contender is not None:
            contender.close()
        dispose(monitor, writes)
        server.stop()
    keepalive = _keepalive_measures(values, estimate, interval, hz, late, within, t_gone, t_drop,
                                    t_last=acquired["t"])  # the lock connection's last use before the drop: its grant
    client_seen = {"settings": client, **learned, "asked_after_drop_s": round(t_go - t_drop, 3)}
    measures: NetDropMeasures = {**base, "evidence": evidence, "keepalive": keepalive, "client": client_seen}
    return dict(measures)  # its shape: NetDropMeasures


def _keepalive_measures(values: dict, estimate: float, interval: float, hz: int | None, late: float, within: float,
                        t_gone: float | None, t_drop: float, t_last: float) -> dict:
    """What the server's keepalives did: its settings, doctor's estimate, and when the lock's session ended after
    its last use and after the drop (None: it never did), against the estimate within one probe interval."""
    ended = None if t_gone is None else round(t_gone - t_last, 3)
    return {
        "server": {"idle": values.get("tcp_keepalives_idle"), "interval": values.get("tcp_keepalives_interval"),
                   "count": values.get("tcp_keepalives_count")},
        "doctor_estimate_s": estimate, "probe_interval_s": interval,
        "kernel_hz": hz, "timer_lateness_s": late,
        "session_ended": t_gone is not None,
        "ended_after_last_use_s": ended, "ended_after_drop_s": None if t_gone is None else round(t_gone - t_drop, 3),
        "drop_after_last_use_s": round(t_drop - t_last, 3),
        "agrees_within_interval": None if ended is None else ends_as_estimated(ended, estimate, interval, late),
        "waited_s": round(within, 1),
    }


@functools.cache
def _kernel_hz() -> int | None:
    """The kernel's HZ, measured once per process (half a second of counting jiffies)."""
    return measure_hz()


def _wait_gone(env: TrialEnv, monitor, pid: int | None, within: float) -> float | None:
    """When the server showed session pid gone (monotonic), or None after within seconds; a stopped run
    (Ctrl-C) ends the wait at once, even the OS defaults' two hours."""
    start = time.monotonic()
    while pg.session_state(monitor, pid) != "gone":
        if time.monotonic() - start > within:
            return None
        if env.stop.wait(0.05):
            raise Interrupted()
    return time.monotonic()


def _holder_learns(holder: HolderProcess, patience: float) -> dict:
    """From its go, the holder writes, asks held() (which asks the server from another session) and releases
    on its dropped connection: when each step came back, and the first that did not within patience."""
    t_go = time.monotonic()
    steps: dict[str, dict] = {}
    for step in ("write", "held", "release"):
        try:
            event = holder.wait_for(step, patience)
        except TimeoutError:
            return {"steps": steps, "stuck_at": step, "still_waiting_after_s": patience}
        except RuntimeError:  # the holder ended early; its error event says why
            return {"steps": steps, "stuck_at": None, "ended_before": step}
        found = {"after_go_s": round(event["t"] - t_go, 3)}
        found.update({k: event.get(k) for k in {"write": ("outcome",), "held": ("held",),
                                                  "release": ("result",)}[step]})
        steps[step] = found
    return {"steps": steps, "stuck_at": None}
