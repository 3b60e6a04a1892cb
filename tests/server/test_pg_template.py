"""A per-trial PostgreSQL copied from the run's initdb'd template: made once, a working cluster, each copy its own."""

import shutil
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import text

from lab.servers.clients import pg_engine, parse_pg_dsn
from lab.servers.postgres.server import EmbeddedPostgres, template_for

pytestmark = pytest.mark.server


def test_copies_of_the_template_are_working_clusters_of_their_own(services):
    run_pg = services.embedded["postgres"]
    root = Path(tempfile.mkdtemp(prefix="template-test-", dir=services.tmp))
    root.chmod(0o755)
    template = template_for(run_pg.bin, services.tmp)
    assert template_for(run_pg.bin, services.tmp) is template  # made once per run and binaries
    servers = [EmbeddedPostgres(root, bin_dir=run_pg.bin, name=f"copy{i}", template=template) for i in range(2)]
    engines = []
    try:
        for server in servers:
            server.start()
            engines.append(pg_engine(parse_pg_dsn(server.dsn), isolation_level="AUTOCOMMIT", poolclass=None))
        assert servers[0].password == servers[1].password == template.password
        with engines[0].connect() as conn:
            conn.execute(text("create table only_in_the_first (n int)"))
        with engines[1].connect() as conn:  # the second copy never saw it: two clusters, not one
            assert conn.execute(text("select to_regclass('only_in_the_first')")).scalar() is None
            assert conn.execute(text("show password_encryption")).scalar() == "scram-sha-256"
        assert not (template.data / "postmaster.pid").exists()  # the template itself never runs
    finally:
        for engine in engines:
            engine.dispose()
        for server in servers:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
