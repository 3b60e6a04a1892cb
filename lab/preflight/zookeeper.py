"""What sits at a ZooKeeper connect string: servers that serve, or one in read-only mode (cut off from its
ensemble's quorum: it refuses every write, an ephemeral lock node included). `srvr` says, per server."""

from __future__ import annotations

import time

from lab.errors import ServiceError
from lab.preflight.findings import Finding, Problem, Refusal, Sits
from lab.servers.zookeeper.server import four_letter, parse_hosts

MEANING = "a lock your jobs take here is the ensemble's own, so each lock behaves as the lab measures it"


def look(hosts: str) -> Finding:
    started, modes = time.monotonic(), {}
    for host, port in parse_hosts(hosts):
        try:
            answer = four_letter(host, port, "srvr")
        except OSError as exc:
            raise ServiceError(f"zookeeper at {host}:{port} is unreachable: {exc.strerror or exc}") from None
        fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in answer.splitlines()) if v}
        modes[f"{host}:{port}"] = fields.get("Mode", "unknown (srvr not allowed)")
    read_only = [address for address, mode in modes.items() if mode == "read-only"]
    if read_only:
        what = f"a ZooKeeper in read-only mode at {', '.join(read_only)} (cut off from its quorum)"
        return Finding("zookeeper", hosts, Sits.READ_ONLY, what, "no job can take a lock there: every write, a lock's "
                       "node included, is refused", refusal=Refusal(
                           Problem.WRITE_REFUSED, f"has {what}", "the addresses of servers that have a quorum "
                                                                 "(--zk-hosts)"),
                       facts={"modes": modes}, seconds=time.monotonic() - started)
    what = "ZooKeeper, " + ", ".join(f"{address} {mode}" for address, mode in modes.items())
    return Finding("zookeeper", hosts, Sits.PRIMARY, what, MEANING, facts={"modes": modes},
                   seconds=time.monotonic() - started)
