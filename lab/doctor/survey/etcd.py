"""An etcd cluster's members and version, reading only, through etcd's JSON gateway (POST /v3/cluster/member/list,
GET /version): no client library needed, and the same for etcd 3.4 and 3.5."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from lab.errors import LabError, ServiceError
from lab.stack.description import Etcd, Unknown

TIMEOUT_S = 5.0


def _base(endpoint: str) -> str:
    """http://host:port for 'host:port' or a URL; LabError for anything else."""
    address = endpoint if "://" in endpoint else f"http://{endpoint}"
    scheme, _, rest = address.partition("://")
    host, colon, port = rest.rstrip("/").rpartition(":")
    if scheme not in ("http", "https") or not colon or not host or not port.isdigit() or "@" in host:
        raise LabError(f"--etcd takes an endpoint as host:port (or http://host:port), not {endpoint!r}")
    return f"{scheme}://{host}:{port}"


def _call(base: str, path: str, body: bytes | None) -> dict:
    request = urllib.request.Request(base + path, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            found = json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise ServiceError(f"etcd at {base} refused {path} ({exc.code}): an etcd with authentication on is not read "
                           "by the doctor") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ServiceError(f"etcd at {base} is unreachable: {getattr(exc, 'reason', exc)}") from None
    except ValueError:
        raise ServiceError(f"etcd at {base} answered {path} with something that is not JSON: is that etcd?") from None
    return found if isinstance(found, dict) else {}


def read_etcd(endpoint: str) -> Etcd:
    base = _base(endpoint)
    members = _call(base, "/v3/cluster/member/list", b"{}").get("members")
    version = _call(base, "/version", None).get("etcdserver")
    return Etcd(version=version if isinstance(version, str) else Unknown("GET /version named no etcdserver"),
                members=len(members) if isinstance(members, list) else Unknown("the member list was empty"))
