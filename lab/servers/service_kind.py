"""What a lock service declares to the lab, once, in its own package: where a user gives its address, the server
the lab starts when none is given, and how an address is read, shown without its password, routed through proxies
and asked for the server's version.

lab/servers/services.py starts, attaches, describes and routes every service through these declarations, so a new
service is one package with a `service.py` and one entry in lab/servers/service_kinds.py, never another branch on a
service's name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from sqlalchemy.engine import URL

from lab.servers.clients import redact

A = TypeVar("A")  # how the lab holds the service's address: a URL, a string, a list of URLs


class ServiceKind(ABC, Generic[A]):
    """One lock service: its name, its environment variable, the Services attribute its address lives in."""

    name: ClassVar[str]
    env_var: ClassVar[str]  # where a user gives the address of a server the lab did not start
    flag: ClassVar[str]  # ... or its flag: `lab run --<flag>`, and the ExternalAddresses attribute that holds it
    field: ClassVar[str]  # the lab.servers.services.Services attribute that holds the address
    os_package: ClassVar[str | None] = None  # the .ci/os-packages package the lab's own server comes from

    server_class: ClassVar[type]  # the lab's own server: made with the temp dir it keeps its data under
    address_attribute: ClassVar[str]  # the started server's attribute that is its address, as a user would give it

    def missing(self) -> str | None:
        """Why the lab cannot start its own server of this service here (its OS package is missing), or None."""
        return None

    def own_server(self, tmp: Path) -> Any:
        """The lab's own server, not yet started, keeping its data under tmp."""
        return self.server_class(tmp)

    def own_address(self, server: Any) -> A:
        """The address of the lab's own server once it is started."""
        return self.parse(getattr(server, self.address_attribute))

    def parse(self, text: Any) -> A:
        """A user's address (a flag or the environment variable), checked: a malformed one is a ServiceError."""
        return text

    def shown(self, address: A) -> str:
        """The address as the console and meta.json show it: passwords hidden."""
        return redact(address) if isinstance(address, (str, URL)) else str(address)

    @abstractmethod
    def hosts(self, address: A) -> list[tuple[str | None, int]]:
        """(host, port) of every server at the address (None: a URL without a host)."""

    @abstractmethod
    def routed(self, address: A, ports: list[int]) -> A:
        """The address with each server reached through 127.0.0.1:port instead (a proxy each), credentials kept."""

    @abstractmethod
    def version(self, address: A, timeout: float) -> str:
        """Connect once and read the server's version: the reachability check for every service."""
