"""MariaDB as a lock service: LAB_MARIADB_URL, the lab's own mariadbd from the operating system's packages."""

from __future__ import annotations

from sqlalchemy.engine import URL

from lab.servers.clients import parse_mariadb_url
from lab.servers.mariadb import sql
from lab.servers.mariadb.server import EmbeddedMariaDB, missing
from lab.servers.service_kind import ServiceKind
from lab.declarations.where import Service


class MariaDBService(ServiceKind[URL]):
    """A MariaDB URL (mysql:// or mariadb://, PyMySQL), the lab's own mariadbd where it is installed."""

    name = Service.MARIADB
    env_var, flag, field = "LAB_MARIADB_URL", "mariadb_url", "mariadb_url"
    server_class, address_attribute = EmbeddedMariaDB, "url"
    os_package = "mariadb-server"

    def missing(self) -> str | None:
        return missing()

    def parse(self, text: str) -> URL:
        return parse_mariadb_url(text)

    def hosts(self, address: URL) -> list[tuple[str | None, int]]:
        return [(address.host, address.port or 3306)]

    def routed(self, address: URL, ports: list[int]) -> URL:
        return address.set(host="127.0.0.1", port=ports[0])

    def version(self, address: URL, timeout: float) -> str:
        return sql.version(address)
