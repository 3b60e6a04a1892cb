"""The SQL servers besides PostgreSQL that a run's company rows live on (a backend's writes_to: MariaDB).

For each one a runnable trial writes to: the run's monitor and writes pools there, the lab's schema, and what the
backends writing there keep in it; dropped and closed when the run ends, as PostgreSQL's are.
"""

from __future__ import annotations

import backends
from lab.runner.plan import Plan
from lab.servers.services import Services
from lab.servers.stores import run_engines
from lab.workload.table import drop_schema, ensure_schema

Stores = dict  # store -> (monitor, writes)


def open_stores(plan: Plan, services: Services, backend_names: list[str]) -> Stores:
    """Engines, schema and storage on every store other than PostgreSQL that a trial still to run writes to."""
    needed = sorted({backends.load(spec.backend).writes_to for specs in plan.pending.values() for spec in specs
                     if spec.skip is None} - {"postgres"})
    stores: Stores = {}
    try:
        for store in needed:
            stores[store] = run_engines(services, store)
            ensure_schema(stores[store][0])
            backends.prepare_storage(stores[store][0], backend_names)
    except BaseException:
        close_stores(stores, dropping=False)
        raise
    return stores


def close_stores(stores: Stores, dropping: bool) -> None:
    """Drop the lab's schema on each store (unless the run was stopped: its tables are evidence) and close its pools."""
    for monitor, writes in stores.values():
        try:
            if dropping:
                drop_schema(monitor)
        finally:
            monitor.dispose()
            writes.dispose()
