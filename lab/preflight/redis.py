"""What sits at a Redis address (and at each Redlock master): a primary that takes the lab's writes, or a replica.

A replica answers READONLY to every write a lock makes, so each of its cells would error rather than measure; an
ACL, a full memory or min-replicas-to-write can refuse the writes of a primary as well. So the look reads the role
(INFO replication) and then writes one key of the lab's own (`locklab:preflight:<random>`, PX 5000, deleted at once):
the server's refusal, in its own words, is the one line.
"""

from __future__ import annotations

import secrets
import time

from lab.errors import ServiceError
from lab.preflight.findings import Finding, Problem, Refusal, Sits
from lab.servers.clients import first_line, no_retry, redact, redis_client

TIMEOUT_S = 3.0
PROBE_PREFIX = "locklab:preflight:"  # every key of the lab's starts with locklab:
MEANING = {
    Sits.PRIMARY: "a lock your jobs take here is the primary's own, so each lock behaves as the lab measures it",
    Sits.REPLICA: "no job can take a lock here: a replica refuses every write (READONLY), and a lock a job took on "
                  "the primary reaches it only as replication delivers it",
}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def look_server(url: str, service: str = "redis", flag: str = "--redis-url") -> Finding:
    """One Redis server (or the primary its Sentinels name); ServiceError when it cannot be reached."""
    started, shown = time.monotonic(), redact(url)
    client = redis_client(url, socket_timeout=TIMEOUT_S, retry=no_retry())
    try:
        try:
            replication = client.info("replication")
            version = _text(client.info("server").get("redis_version", "?"))
        except Exception as exc:
            raise ServiceError(f"{service} at {shown} is unreachable: {first_line(exc)}") from None
        role = _text(replication.get("role", ""))
        facts = {"version": version, "role": role}
        if role != "master":
            primary = f"{replication.get('master_host')}:{replication.get('master_port')}"
            facts["primary"] = primary
            what = f"a replica of {primary} (Redis {version}, role:{role})"
            return Finding(service, shown, Sits.REPLICA, what, MEANING[Sits.REPLICA], refusal=Refusal(
                Problem.REPLICA, f"is {what}: it answers READONLY to every write a lock makes",
                f"the primary's address with {flag} (host and port {primary}), or its Sentinels' as "
                "redis+sentinel://..."), facts=facts, seconds=time.monotonic() - started)
        refused = _write_refused(client)
        what = f"Redis {version}, a primary"
        return Finding(service, shown, Sits.PRIMARY, what, MEANING[Sits.PRIMARY], refusal=None if refused is None else
                       Refusal(Problem.WRITE_REFUSED, f"refused the lab's write of a key of its own "
                                                  f"({PROBE_PREFIX}...): {refused}",
                               f"a user and server that accept writes of keys under locklab: ({flag})"),
                       facts=facts, seconds=time.monotonic() - started)
    finally:
        client.close()


def _write_refused(client) -> str | None:
    """The server's words when it refuses a write of the lab's own key, else None (the key is gone again)."""
    key = PROBE_PREFIX + secrets.token_hex(8)
    try:
        client.set(key, "1", px=5000)
        client.delete(key)
    except Exception as exc:
        return first_line(exc)
    return None


def look_masters(urls: list[str]) -> Finding:
    """Redlock's independent masters: each must be a primary that takes the lab's writes; the first that is not
    is the finding."""
    started = time.monotonic()
    found = [look_server(url, "redlock", "--redlock-urls") for url in urls]
    refused = next((f for f in found if f.refusal is not None), None)
    if refused is not None:
        return refused
    shown = ", ".join(f.shown for f in found)
    return Finding("redlock", shown, Sits.PRIMARY, f"{len(found)} independent Redis primaries",
                   MEANING[Sits.PRIMARY], facts={"masters": [f.facts for f in found]},
                   seconds=time.monotonic() - started)
