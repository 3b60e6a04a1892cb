"""The patroni scenario's trial on the user's cluster, with the user's own command: every client on the URL they
gave, the grant replayed on every standby before the command, the promotion probe with several hosts.
"""

from __future__ import annotations

import time
from dataclasses import replace

import psycopg2
from sqlalchemy.engine import URL

from lab.errors import LabError
from lab.faults.commanded import ONE_AT_A_TIME, CommandedFault
from lab.measures.promotion import PromotionProbe, create_probe_table
from lab.measures.promotion import connect as promotion_connect
from lab.servers.clients import pg_hosts
from lab.servers.identity import primary_identity
from lab.servers.postgres.sql import dispose, trial_engines
from scenarios._failover_trial import failover_trial
from scenarios._patroni_cluster import GUARD_S
from scenarios.base import TrialEnv

REPLAYED_WITHIN_S = 30.0  # on the user's cluster, before the fault: until its standbys have replayed the grant


def on_your_cluster(env: TrialEnv, fault: CommandedFault) -> dict:
    """The same trial on the user's cluster with the user's own command (fault): every client on the URL they
    gave, the grant replayed on every other host before the command, and with several hosts the promotion probe
    on the old primary (as on the lab's cluster). Verdicts come from the same checkers."""
    url = env.services.pg()
    nodes = {f"{host}:{port}": url.set(host=host, port=port, query={}) for host, port in pg_hosts(url)}
    with ONE_AT_A_TIME:  # a failover of the user's service reaches every trial on it
        monitor, writes = trial_engines(url)
        probe, old = None, ""
        try:
            if len(nodes) > 1:
                old = primary_identity(env.services, "postgres")["address"]
                create_probe_table(nodes[old])
                # Connected to the old primary before the fault, as a client already is.
                probe = PromotionProbe(f"your cluster manager ({fault.hook.value} command)", old, nodes)

            def caught_up() -> dict:
                replayed = _replayed_everywhere(nodes, old, REPLAYED_WITHIN_S)
                if probe is not None:
                    # Started as the command is about to run, not once it has: a command may return only when its
                    # failover is done (patronictl waits for the switchover), and the window is what it measures.
                    probe.start(time.monotonic())
                return {"standbys_replayed_s": replayed}

            def settle() -> dict:
                dispose(monitor, writes)  # the final table is read on a fresh connection, once one primary is left
                return {}

            measures = failover_trial(replace(env, monitor=monitor, writes=writes), fault, once_held=caught_up,
                                      settle=settle, guard_s=GUARD_S, retry_errors=True)
            if probe is not None:
                probe.stop()
            settled, _ = fault.settle(env.services, "postgres")
            measures["evidence"].update(settled)
            if probe is not None:
                survivor = settled.get("primary_after_heal") or measures["evidence"].get("primary_after_heal")
                at = survivor.get("address") if isinstance(survivor, dict) else None
                measures["promotion"] = probe.measures(nodes.get(at) if at is not None else None)
                measures["evidence"]["probe"] = probe.details()
        finally:
            if probe is not None:
                probe.stop()
            fault.stop_watch()
            dispose(monitor, writes)
    measures["patroni"] = {"cluster": "yours", "hosts": len(nodes),
                           "clients": "your URL" + (", several hosts" if len(nodes) > 1 else "")}
    return measures


def _replayed_everywhere(nodes: dict[str, URL], primary: str, within: float) -> float | None:
    """Seconds until every other host of the user's URL has replayed what the primary had written when asked (the
    holder's grant on the standby before the fault, as on the lab's cluster); None with a single host. A host that
    does not catch up within the bound makes the trial an error: the fault would test the lag instead."""
    if len(nodes) < 2:
        return None
    started = time.monotonic()
    target = _ask(nodes[primary], "select pg_current_wal_lsn()::text")
    for address, node in nodes.items():
        said = "no answer"
        while address != primary:
            try:
                behind = _ask(node, "select pg_wal_lsn_diff(%s, pg_last_wal_replay_lsn())", (target,))
            except psycopg2.Error as exc:  # a standby restarting: asked again until the bound
                behind, said = None, type(exc).__name__
            if behind is not None and behind <= 0:
                break
            said = said if behind is None else f"{behind} bytes behind"
            if time.monotonic() - started > within:
                raise LabError(f"{address} did not replay the primary's WAL within {within:.0f} s ({said})")
            time.sleep(0.05)  # nothing announces a replay to a client: ask again
    return round(time.monotonic() - started, 3)


def _ask(url: URL, query: str, args: tuple = ()):
    """One value from one host, on a session of its own."""
    conn = promotion_connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(query, args)
            row = cur.fetchone()
    finally:
        conn.close()
    return None if row is None else row[0]


