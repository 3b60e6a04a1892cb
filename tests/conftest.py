"""Shared fixtures: the lab's own embedded servers, once per test session."""

from __future__ import annotations

import logging

import pytest

# Tests kill sessions on purpose; the pool's reset failures on those are expected, as in the lab.
logging.getLogger("sqlalchemy.pool").addHandler(logging.NullHandler())
logging.getLogger("sqlalchemy.pool").propagate = False


@pytest.fixture(scope="session")
def services():
    """Real PostgreSQL, Redis (one, and three Redlock masters) and etcd on loopback, stopped (and their temp dir removed) at the end."""
    from lab.servers.services import start_services

    with start_services(["postgres", "redis", "etcd", "redlock"]) as running:
        yield running


@pytest.fixture(scope="session")
def engines(services):
    import backends
    from lab.harness.workload import drop_schema, ensure_schema
    from lab.servers import pg

    monitor, writes = pg.monitor_engine(services), pg.writes_engine(services)
    ensure_schema(monitor)
    backends.prepare_storage(monitor, backends.names())
    yield monitor, writes
    drop_schema(monitor)
    monitor.dispose()
    writes.dispose()
