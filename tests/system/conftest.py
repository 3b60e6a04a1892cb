"""The distribution-packaged tier: PostgreSQL 15 and Redis 7 from the operating system, set up as a
cautious DBA would, started by the fixture itself on free ports in a temp dir (never the system service).

`.ci/run` installs the packages with apt-get (from .ci/os-packages) and sets LAB_REQUIRE_SYSTEM_SERVERS=1, so
in CI a missing package fails the tier; elsewhere it is skipped with the install command (tests/os_packages.py).
Skip it on purpose with `pytest -m "not system"`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import os_packages

# Where the list of optional packages says each is found: PostgreSQL 15's bin folder, Redis 7's server.
PG15 = Path(os_packages.packages()["postgresql-15"].binary).parent
REDIS7 = Path(os_packages.packages()["redis-server"].binary)
# What a cautious DBA sets: few connections, guards on idle sessions at database level, a statement and
# lock timeout for the application's role. The lab must pin what it relies on and fit its trials in.
MAX_CONNECTIONS = 50
DATABASE_GUARDS = {"idle_session_timeout": "1s", "idle_in_transaction_session_timeout": "1s"}
ROLE_GUARDS = {"statement_timeout": "5s", "lock_timeout": "2s"}


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (it is its own CA), made with the openssl command."""
    key, cert = folder / "server.key", folder / "server.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return key, cert


def _postgres_tls_only(postgres, conn, key: Path, cert: Path) -> None:
    """TLS on, and pg_hba refusing any connection without it: a component that drops sslmode fails."""
    import pwd

    from sqlalchemy import text

    for source, name in ((key, "server.key"), (cert, "server.crt")):
        target = postgres.data / name
        shutil.copy(source, target)
        if postgres.user is not None:
            entry = pwd.getpwnam(postgres.user)
            os.chown(target, entry.pw_uid, entry.pw_gid)
        target.chmod(0o600)
    (postgres.data / "pg_hba.conf").write_text("hostssl all all 127.0.0.1/32 scram-sha-256\n"
                                               "hostnossl all all 0.0.0.0/0 reject\n")
    conn.execute(text("alter system set ssl = on"))
    conn.execute(text("select pg_reload_conf()"))


def _redis_tls_only(client, key: Path, cert: Path) -> int:
    """Open a TLS port for the lab and return it (the fixture closes the plain port once done with it)."""
    from lab.servers.processes import free_port

    port = free_port()
    client.config_set("tls-cert-file", str(cert))
    client.config_set("tls-key-file", str(key))
    client.config_set("tls-ca-cert-file", str(cert))
    client.config_set("tls-auth-clients", "no")
    client.config_set("tls-port", str(port))
    return port


@dataclass
class DbaServers:
    pg_dsn: str  # the application role's, not a superuser's; TLS required (sslmode=require)
    redis_url: str  # rediss://: TLS, an ACL user with a password; the default user is off
    pg_password: str
    redis_password: str
    pg_version: str
    redis_version: str


@pytest.fixture(scope="session")
def dba_servers():
    os_packages.require("postgresql-15", "redis-server")
    import redis
    from sqlalchemy import text

    from lab.servers.clients import pg_engine
    from lab.servers.postgres.server import EmbeddedPostgres
    from lab.servers.redis.server import EmbeddedRedis
    from lab.servers.embedded import new_password

    root = Path(tempfile.mkdtemp(prefix="locklab-dba-", dir="/tmp"))
    root.chmod(0o755)  # the server's unprivileged user must reach its data dir
    postgres = EmbeddedPostgres(root, bin_dir=PG15, max_connections=MAX_CONNECTIONS)
    server = EmbeddedRedis(root, "redis7", server=REDIS7)
    app_pg, app_redis = new_password(), new_password()
    try:
        postgres.start()
        server.start()
        key, cert = _certificate(root)
        admin = pg_engine(postgres.dsn, pin=False, poolclass=None, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f"create role app login password '{app_pg}'"))  # noqa: S608 - our own random token
            conn.execute(text("create database appdb owner app"))
            for name, value in DATABASE_GUARDS.items():
                conn.execute(text(f"alter database appdb set {name} = '{value}'"))
            for name, value in ROLE_GUARDS.items():
                conn.execute(text(f"alter role app set {name} = '{value}'"))
            pg_version = conn.execute(text("show server_version")).scalar()
            _postgres_tls_only(postgres, conn, key, cert)
        admin.dispose()
        client = redis.Redis(host="127.0.0.1", port=server.port, password=server.password)
        client.execute_command("ACL", "SETUSER", "app", "on", f">{app_redis}", "~*", "&*", "+@all")
        redis_version = client.info("server")["redis_version"]
        tls_port = _redis_tls_only(client, key, cert)
        client.execute_command("ACL", "SETUSER", "default", "off")
        client.config_set("port", "0")  # the plain port closes; this connection stays until closed
        client.close()
        yield DbaServers(f"postgresql://app:{app_pg}@127.0.0.1:{postgres.port}/appdb?sslmode=require",
                         f"rediss://app:{app_redis}@127.0.0.1:{tls_port}/0?ssl_ca_certs={cert}",
                         app_pg, app_redis, pg_version, redis_version)
    finally:
        server.stop()
        postgres.stop()
        shutil.rmtree(root, ignore_errors=True)
