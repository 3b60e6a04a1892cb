"""Where a run says each lock lives, read from its meta.json, and the one reason a fault cannot reach a lock.

A lock whose own service is not among the services a fault column strikes is out of that fault's reach: a ○
there says the fault never could take its right away, which the decision counts as *unaffected*, not unproven.
"""

from __future__ import annotations

from lab.declarations.capabilities import Capability
from lab.declarations.where import Where


def declared(meta: dict, key: str, backend: str):
    """What the run's meta.json declares of a backend under key (capabilities, lock_service, ...), or None; a driver
    row (backend@driver) is declared as its backend."""
    return (meta.get(key) or {}).get(backend.partition("@")[0])


def where_of(meta: dict, backend: str) -> Where | None:
    """Where a backend's lock, fence and writes live, as its run recorded it; for a run recorded before that, from
    its lock service (every built-in lock wrote to PostgreSQL, and a fenced one was fenced there)."""
    recorded = declared(meta, "where", backend)
    if isinstance(recorded, dict):
        return Where.from_json(recorded)
    service = declared(meta, "lock_service", backend)
    if service is None:
        return None
    fenced = Capability.FENCING in (declared(meta, "capabilities", backend) or ())
    return Where(lock=service, writes="postgres", fence="postgres" if fenced else None)


def unaffected_reason(where: Where | None, strikes: tuple[str, ...] | list[str] | None,
                      cannot_take: str | None = None) -> str | None:
    """Why a fault cannot take a lock's right away, by declaration: its lock lives on a service the column does not
    strike, or the column declares it cannot take this kind of right (cannot_take: that reason, or None). None where
    it can (or where the column strikes whichever service holds the lock: strikes is None)."""
    if where is not None and strikes is not None and where.lock not in strikes:
        return f"its lock lives in {where.lock}, which this fault does not strike"
    return cannot_take
