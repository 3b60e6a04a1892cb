"""The distribution-packaged tier: PostgreSQL 15 and Redis 7 from the operating system, set up as a
cautious DBA would, started by the fixture itself on free ports in a temp dir (never the system service).

`.ci/run` installs the packages with apt-get and sets LAB_REQUIRE_SYSTEM_SERVERS=1, so in CI a missing
package fails the tier; elsewhere it is skipped with the install command. Skip it on purpose with
`pytest -m "not system"`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

PG15 = Path("/usr/lib/postgresql/15/bin")
REDIS7 = Path("/usr/bin/redis-server")
INSTALL = "apt-get install postgresql-15 redis-server"
# What a cautious DBA sets: few connections, guards on idle sessions at database level, a statement and
# lock timeout for the application's role. The lab must pin what it relies on and fit its trials in.
MAX_CONNECTIONS = 50
DATABASE_GUARDS = {"idle_session_timeout": "1s", "idle_in_transaction_session_timeout": "1s"}
ROLE_GUARDS = {"statement_timeout": "5s", "lock_timeout": "2s"}


@dataclass
class DbaServers:
    pg_dsn: str  # the application role's, not a superuser's
    redis_url: str  # an ACL user with a password; the default user is off
    pg_password: str
    redis_password: str
    pg_version: str
    redis_version: str


def _missing() -> str | None:
    for path, package in ((PG15 / "postgres", "postgresql-15"), (REDIS7, "redis-server")):
        if not path.exists():
            return f"does not run: {package} not installed ({path} missing; {INSTALL})"
    return None


@pytest.fixture(scope="session")
def dba_servers():
    reason = _missing()
    if reason:
        if os.environ.get("LAB_REQUIRE_SYSTEM_SERVERS"):
            pytest.fail(reason)
        pytest.skip(reason)
    import redis
    from sqlalchemy import text

    from lab.servers.clients import pg_engine
    from lab.servers.embedded import EmbeddedPostgres, EmbeddedRedis, new_password

    root = Path(tempfile.mkdtemp(prefix="locklab-dba-", dir="/tmp"))
    root.chmod(0o755)  # the server's unprivileged user must reach its data dir
    postgres = EmbeddedPostgres(root, bin_dir=PG15, max_connections=MAX_CONNECTIONS)
    server = EmbeddedRedis(root, "redis7", server=REDIS7)
    app_pg, app_redis = new_password(), new_password()
    try:
        postgres.start()
        server.start()
        admin = pg_engine(postgres.dsn, pin=False, poolclass=None, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f"create role app login password '{app_pg}'"))  # noqa: S608 - our own random token
            conn.execute(text("create database appdb owner app"))
            for name, value in DATABASE_GUARDS.items():
                conn.execute(text(f"alter database appdb set {name} = '{value}'"))
            for name, value in ROLE_GUARDS.items():
                conn.execute(text(f"alter role app set {name} = '{value}'"))
            pg_version = conn.execute(text("show server_version")).scalar()
        admin.dispose()
        client = redis.Redis(host="127.0.0.1", port=server.port, password=server.password)
        client.execute_command("ACL", "SETUSER", "app", "on", f">{app_redis}", "~*", "&*", "+@all")
        redis_version = client.info("server")["redis_version"]
        client.execute_command("ACL", "SETUSER", "default", "off")
        client.close()
        yield DbaServers(f"postgresql://app:{app_pg}@127.0.0.1:{postgres.port}/appdb",
                         f"redis://app:{app_redis}@127.0.0.1:{server.port}/0", app_pg, app_redis,
                         pg_version, redis_version)
    finally:
        server.stop()
        postgres.stop()
        shutil.rmtree(root, ignore_errors=True)
