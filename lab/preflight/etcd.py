"""What sits at an etcd endpoint: a member that takes the lab's writes, or one that refuses them (a learner, an
etcd with authentication on and no user given, a cluster without a leader). One put and delete of a key of the
lab's own (`locklab/preflight/<random>`) tells, in the server's words."""

from __future__ import annotations

import secrets
import time

from lab.errors import ServiceError
from lab.preflight.findings import Finding, Problem, Refusal, Sits
from lab.servers.clients import etcd_client, first_line

TIMEOUT_S = 3.0
MEANING = "a lock your jobs take here is the cluster's own, so each lock behaves as the lab measures it"


def look(endpoint: str) -> Finding:
    started = time.monotonic()
    client = etcd_client(endpoint, timeout=TIMEOUT_S)
    try:
        try:
            status = client.status()
        except Exception as exc:
            raise ServiceError(f"etcd at {endpoint} is unreachable: {first_line(exc)}") from None
        what = f"etcd {status.version}, a member" + ("" if status.leader is not None else " (no leader seen)")
        key = f"locklab/preflight/{secrets.token_hex(8)}"
        try:
            client.put(key, "1")
            client.delete(key)
            refused = None
        except Exception as exc:
            refused = Refusal(Problem.WRITE_REFUSED, f"refused the lab's write of a key of its own ({key}): "
                                                     f"{first_line(exc)}",
                              "an endpoint of a member that takes writes (--etcd-endpoint); the lab's locks and its "
                              "own keys live under locklab")
        return Finding("etcd", endpoint, Sits.PRIMARY, what, MEANING, refusal=refused,
                       facts={"version": status.version, "leader": status.leader is not None},
                       seconds=time.monotonic() - started)
    finally:
        client.close()
