"""A trial on a SQL server of its own (PostgreSQL or MariaDB): the lab's schema and the backend's storage on it.

Why: a fault that acts on the whole server (a restart, a SIGSTOP) reaches every session on the run's server, so
such a trial had to run with nothing beside it. On a server of its own, with every session of the trial there (the
lock's, the holder's writes, the contender's, the monitor's), the fault reaches that trial alone and trials run
side by side. The server is the run's binaries with the run's defaults: PostgreSQL's data copied from the run's
initdb'd template (lab/servers/postgres/template.py), MariaDB's made by mariadb-install-db (about 1 s here), so what the
trial meets is what it met on the run's server.
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import ClassVar, Iterator

from sqlalchemy.engine import Engine, make_url

import backends
from lab.servers.mariadb import sql as mariadb_sql
from lab.servers.mariadb.server import EmbeddedMariaDB
from lab.servers.postgres.server import EmbeddedPostgres, template_for
from lab.servers.postgres.sql import dispose, trial_engines
from lab.servers.services import Services
from lab.declarations.where import DATABASES
from lab.workload.table import ensure_schema
from scenarios._trial_folders import shared_folder
from scenarios.base import TrialEnv


def on_own_store(backend_cls, services: Services) -> bool:
    """Whether a trial of this backend runs whole on a SQL server of its own: its lock lives on the server its
    company rows do (PostgreSQL or MariaDB), and the lab started the run's in a temp dir of its own (a server it
    was given is restarted only by your command, and is the run's)."""
    store = backend_cls.lock_service
    return store in DATABASES and backend_cls.writes_to == store and services.is_embedded(store) \
        and services.tmp is not None


def _server(services: Services, store: str, root: Path, name: str):
    """A server of the store's kind, as the run's was made, not yet started."""
    if store == "mariadb":
        return EmbeddedMariaDB(root, name, install=(services.embedded["mariadb"].server,
                                                    services.embedded["mariadb"].install_db))
    run_server = services.embedded["postgres"]
    assert services.tmp is not None  # on_own_store() said so
    return EmbeddedPostgres(root, bin_dir=run_server.bin, name=name,
                            template=template_for(run_server.bin, services.tmp))


def _engines(store: str, services: Services) -> tuple[Engine, Engine]:
    """The trial's monitor (AUTOCOMMIT) and writes engines on its own server; pre-ping, since the fault ends their
    sessions."""
    if store == "mariadb":
        url = services.mariadb()
        return mariadb_sql.monitor_engine(url), mariadb_sql.writes_engine(url)
    return trial_engines(services.pg())


@contextmanager
def own_store(env: TrialEnv, name: str) -> Iterator[TrialEnv]:
    """The trial's env with every address, pool and handle of its store on a server of its own, stopped at the end."""
    store = backends.load(env.spec.backend).lock_service
    assert env.services.tmp is not None  # on_own_store() said so
    root = shared_folder(env.services.tmp, f"{name}-")  # the server's OS user reaches its data below
    server = _server(env.services, store, root, name)
    monitor = writes = None
    try:
        server.start()
        # tmp=None: what the trial starts below this is under root, removed with it
        services = replace(env.services, embedded={**env.services.embedded, store: server}, tmp=None)
        if store == "mariadb":
            services = replace(services, mariadb_url=make_url(server.url))
        else:
            services = replace(services, pg_url=make_url(server.dsn))
        monitor, writes = _engines(store, services)
        ensure_schema(monitor)
        backends.prepare_storage(monitor, [env.spec.backend])
        yield replace(env, services=services, monitor=monitor, writes=writes)
    finally:
        dispose(monitor, writes)
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


class OnOwnStore:
    """A scenario mixin: a trial whose lock shares its SQL server with its writes runs on a server of its own
    (own_store), where the lab started the run's; the others run as the scenario does."""

    name: ClassVar[str]

    def run_trial(self, env: TrialEnv) -> dict:
        if not on_own_store(backends.load(env.spec.backend), env.services):
            return super().run_trial(env)  # type: ignore[misc]
        with own_store(env, f"{self.name}-server") as inside:
            measures = super().run_trial(inside)  # type: ignore[misc]
        measures["evidence"]["server"] = "the trial's own"  # the fault acted on the server it was handed
        return measures
