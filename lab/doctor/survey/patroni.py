"""Patroni's settings from its REST API, reading only: GET /config (the cluster's dynamic configuration), /patroni
(the node's status) and /cluster (its members).

The REST API does not report the watchdog's mode (each node's patroni.yml keeps it): it stays unknown unless the
node says its required watchdog failed, and the stack file is where a user states it.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request

from lab.errors import LabError, ServiceError
from lab.servers.clients import redact_text
from lab.stack.description import Patroni, Unknown, Watchdog

TIMEOUT_S = 5.0
# What Patroni uses when the dynamic configuration does not set a key (its documentation's defaults).
DEFAULTS = {"synchronous_mode": False, "synchronous_mode_strict": False, "failsafe_mode": False, "ttl": 30,
            "loop_wait": 10, "retry_timeout": 10, "maximum_lag_on_failover": 1048576}
WATCHDOG_UNREAD = Unknown("Patroni's REST API does not report the watchdog's mode (watchdog.mode in each node's "
                          "patroni.yml): set postgres.ha.watchdog in the stack file")


def _get(base: str, path: str, auth: str | None) -> dict:
    request = urllib.request.Request(base.rstrip("/") + path, headers={"Accept": "application/json"})
    if auth:
        request.add_header("Authorization", f"Basic {auth}")
    shown = redact_text(base)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            body = answer.read()
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise ServiceError(f"Patroni at {shown} refused GET {path} ({exc.code}): give its REST credentials as "
                               "http://user:password@host:port") from None
        body = exc.read()  # /patroni answers 503 on a replica or a stopped postgres, with the same JSON
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServiceError(f"Patroni at {shown} is unreachable: {reason}") from None
    try:
        found = json.loads(body or b"{}")
    except ValueError:
        raise ServiceError(f"Patroni at {shown} answered GET {path} with something that is not JSON: is that its REST "
                           "API?") from None
    if not isinstance(found, dict):
        raise ServiceError(f"Patroni at {shown} answered GET {path} with JSON that is not an object")
    return found


def _split(url: str) -> tuple[str, str | None]:
    """The base URL without credentials, and the Basic authorization they make (None without any)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise LabError(f"--patroni-url must be Patroni's REST API as http://host:port, not {redact_text(url)}")
    try:
        port = parsed.port
    except ValueError:
        raise LabError(f"--patroni-url has a port that is not a number: {redact_text(url)}") from None
    netloc = parsed.hostname + (f":{port}" if port else "")
    base = urllib.parse.urlunsplit((parsed.scheme, netloc, parsed.path, "", ""))
    if parsed.username is None:
        return base, None
    pair = f"{urllib.parse.unquote(parsed.username)}:{urllib.parse.unquote(parsed.password or '')}"
    return base, base64.b64encode(pair.encode()).decode()


def _flag(config: dict, key: str) -> bool | Unknown:
    value = config.get(key, DEFAULTS[key])
    return value if isinstance(value, bool) else Unknown(f"GET /config gave {key} = {value!r}")


def _number(config: dict, key: str) -> int | Unknown:
    value = config.get(key, DEFAULTS[key])
    return value if isinstance(value, int) and not isinstance(value, bool) else Unknown(
        f"GET /config gave {key} = {value!r}")


def read_patroni(url: str) -> Patroni:
    """The cluster's settings; ServiceError (one line, no password) when its REST API cannot be read."""
    base, auth = _split(url)
    config = _get(base, "/config", auth)
    status = _get(base, "/patroni", auth)
    cluster = _get(base, "/cluster", auth)
    version = (status.get("patroni") or {}).get("version")
    members = cluster.get("members")
    watchdog: Watchdog | Unknown = WATCHDOG_UNREAD
    if status.get("watchdog_failed"):
        watchdog = Unknown("the node reports watchdog_failed: its required watchdog is unhealthy")
    return Patroni(version=version if isinstance(version, str) else Unknown("GET /patroni named no version"),
                   members=len(members) if isinstance(members, list) else Unknown("GET /cluster listed no members"),
                   synchronous_mode=_flag(config, "synchronous_mode"),
                   synchronous_mode_strict=_flag(config, "synchronous_mode_strict"),
                   failsafe_mode=_flag(config, "failsafe_mode"), watchdog=watchdog,
                   ttl=_number(config, "ttl"), loop_wait=_number(config, "loop_wait"),
                   retry_timeout=_number(config, "retry_timeout"),
                   maximum_lag_on_failover=_number(config, "maximum_lag_on_failover"))
