"""A trial on a PostgreSQL of its own: a copy of the run's template, with the lab's schema and the backend's storage.

Why: a fault that acts on the whole server (a restart) reaches every session on the run's PostgreSQL, so such a
trial had to run with nothing beside it. On a server of its own, with every session of the trial there (the
lock's, the holder's writes, the contender's, the monitor's), the fault reaches that trial alone and trials run
side by side. The server is the run's binaries with the run's defaults, its data copied from the run's initdb'd
template (lab/servers/pg_template.py), so what the trial meets is what it met on the run's server.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Iterator

from sqlalchemy.engine import make_url

import backends
from lab.servers.embedded import EmbeddedPostgres, template_for
from lab.servers.pg import dispose, trial_engines
from lab.servers.services import Services
from lab.workload.table import ensure_schema
from scenarios.base import TrialEnv


def can_have_own_postgres(services: Services) -> bool:
    """Whether the lab started the run's PostgreSQL in a temp dir of its own: then a trial may have a copy."""
    return services.is_embedded("postgres") and services.tmp is not None


@contextmanager
def own_postgres(env: TrialEnv, name: str) -> Iterator[TrialEnv]:
    """The trial's env with every PostgreSQL address, pool and handle on a server of its own, stopped at the end."""
    run_server = env.services.embedded["postgres"]
    assert env.services.tmp is not None  # can_have_own_postgres() said so
    root = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=env.services.tmp))
    root.chmod(0o755)  # the server's OS user reaches its data below
    server = EmbeddedPostgres(root, bin_dir=run_server.bin, name=name,
                              template=template_for(run_server.bin, env.services.tmp))
    monitor = writes = None
    try:
        server.start()
        url = make_url(server.dsn)
        # tmp=None: what the trial starts below this is under root, removed with it
        services = replace(env.services, pg_url=url, embedded={**env.services.embedded, "postgres": server},
                           tmp=None)
        monitor, writes = trial_engines(url)
        ensure_schema(monitor)
        backends.prepare_storage(monitor, [env.spec.backend])
        yield replace(env, services=services, monitor=monitor, writes=writes)
    finally:
        dispose(monitor, writes)
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
