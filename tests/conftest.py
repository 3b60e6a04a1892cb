"""Shared fixtures: the lab's own embedded servers, once per test session."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile

import pytest

# Tests kill sessions on purpose; the pool's reset failures on those are expected, as in the lab.
logging.getLogger("sqlalchemy.pool").addHandler(logging.NullHandler())
logging.getLogger("sqlalchemy.pool").propagate = False


def pytest_configure(config):
    """The lab's fault declarations, post roles and measured kinds, as `lab report` installs them, for saved runs
    that did not record theirs; and the charts the tests draw cached in a folder of the session's own, not the
    user's (lab/report/chart_cache.py)."""
    import backends
    import scenarios
    from lab.report import chart_cache, declared

    global _charts
    declared.install(scenarios.fault_columns())
    declared.install_roles(backends.post_roles())
    declared.install_measured(scenarios.measured())
    if chart_cache.ENVIRONMENT not in os.environ:
        _charts = os.environ[chart_cache.ENVIRONMENT] = tempfile.mkdtemp(prefix="locklab-charts-")


_charts: str | None = None


def pytest_unconfigure(config):
    from lab.report import chart_cache

    if _charts is not None:
        shutil.rmtree(_charts, ignore_errors=True)
        os.environ.pop(chart_cache.ENVIRONMENT, None)


def pytest_runtest_setup(item):
    """A test marked os_packages("pgbouncer", ...) skips with one line naming what is missing and its install command.

    The marker keeps the rule in one place (tests/os_packages.py), and the skip is raised there, so pytest -rs
    folds every test skipped for one package into one line."""
    from tests import os_packages

    for mark in item.iter_markers("os_packages"):
        os_packages.require(*mark.args, **mark.kwargs)


@pytest.fixture(scope="session")
def services():
    """Real PostgreSQL, Redis (one, and three Redlock masters), etcd and, where Debian's packages are installed,
    ZooKeeper and MariaDB on loopback, stopped (and their temp dir removed) at the end. Without a package its server
    is not started and services.unavailable says why (a test that needs it skips with that line)."""
    from lab.servers.services import start_services

    global _session_services
    with start_services(["postgres", "redis", "etcd", "redlock", "zookeeper", "mariadb"]) as running:
        _session_services = running
        try:
            yield running
        finally:
            _session_services = None


_session_services = None  # the session's servers once a test asked for them


@pytest.fixture(autouse=True)
def _session_servers_still_run(request):
    """After each test, the session's servers must still run: else the session stops here, saying which one died
    and after what (tests/session_servers.py), instead of failing every later test on a refused connection."""
    yield
    if _session_services is None:
        return
    from tests.session_servers import exited

    dead = exited(_session_services.embedded)
    if dead:
        pytest.exit(f"the test session's servers stopped after {request.node.nodeid}: " + "; ".join(dead),
                    returncode=1)


@pytest.fixture(scope="session")
def engines(services):
    import backends
    from lab.servers.postgres import sql as pg
    from lab.workload.table import drop_schema, ensure_schema

    monitor, writes = pg.monitor_engine(services), pg.writes_engine(services)
    ensure_schema(monitor)
    backends.prepare_storage(monitor, backends.names())
    yield monitor, writes
    drop_schema(monitor)
    monitor.dispose()
    writes.dispose()


@pytest.fixture(scope="session")
def store_engines(services):
    """store -> (monitor, writes) on a SQL server besides PostgreSQL that company rows live on (MariaDB), made at
    the first ask, with the lab's schema and what every backend writing there keeps in it; dropped at the end."""
    import backends
    from lab.servers.stores import run_engines
    from lab.workload.table import drop_schema, ensure_schema

    opened: dict = {}

    def on(store: str):
        if store not in opened:
            opened[store] = run_engines(services, store)
            ensure_schema(opened[store][0])
            backends.prepare_storage(opened[store][0], backends.names())
        return opened[store]

    yield on
    for monitor, writes in opened.values():
        drop_schema(monitor)
        monitor.dispose()
        writes.dispose()
