"""The preflight of every address a command was given, in the order the lab starts its services.

`lab run` looks before it loads the runner and the backends (`Gate.ahead`); `lab check-backend` and `lab replay`
through start_services' `check` hook, once the addresses given are parsed and before any server of the lab's own
starts; nothing is written before. `lab doctor` reads the PostgreSQL part on its own session (lab/doctor/postgres.py) and
prints its line before its checks. --pg-pooler-dsn's pooler is looked at after the database it fronts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from lab.preflight import etcd, mariadb, postgres, redis, zookeeper
from lab.preflight.findings import AddressRefused, Finding
from lab.preflight.postgres import PostgresLook
from lab.servers.clients import redact
from lab.servers.service_kinds import KINDS, SERVICE_NAMES
from lab.servers.services import ExternalAddresses, Services, attach_pooler

# service -> how its address (as Services holds it) is looked at; PostgreSQL's look is kept whole (PostgresLook).
LOOKS: dict[str, Callable[..., Finding]] = {
    "redis": redis.look_server,
    "etcd": etcd.look,
    "redlock": redis.look_masters,
    "zookeeper": zookeeper.look,
    "mariadb": mariadb.look,
}


@dataclass(frozen=True)
class Preflight:
    """Every address a command was given, as found."""

    findings: tuple[Finding, ...] = ()
    postgres: PostgresLook | None = None  # the PostgreSQL look whole: its capacity, guards and pooler

    def of(self, service: str) -> Finding | None:
        return next((f for f in self.findings if f.service == service), None)

    def refused(self) -> Finding | None:
        """The first address the lab will not run against, or None."""
        return next((f for f in self.findings if f.refusal is not None), None)

    def check(self) -> None:
        """AddressRefused (one line: what to give instead) for the first address the lab will not run against."""
        if (finding := self.refused()) is not None:
            raise AddressRefused(finding)

    def notes(self) -> list[str]:
        """What the run goes on with that is worth a line of its own (a session pooler in between)."""
        return list(note for f in self.findings for note in f.notes)

    def to_json(self) -> dict:
        return {f.service: f.to_json() for f in self.findings}


def look_at(services: Services, given: Iterable[str]) -> Preflight:
    """Look at each given service's address (each already parsed and reachable); stops at the first refusal, since
    the command will end there anyway."""
    findings: list[Finding] = []
    pg: PostgresLook | None = None
    for name in (n for n in SERVICE_NAMES if n in set(given)):
        if name == "postgres":
            pg = postgres.look(services.pg())
            finding = pg.finding
        else:
            finding = LOOKS[name](services.address(name))
        findings.append(finding)
        if finding.refusal is not None:
            return Preflight(tuple(findings), pg)
    if services.pg_pooler_url is not None and pg is not None:
        findings.append(postgres.look_pooler(services.pg_pooler_url, pg))
    return Preflight(tuple(findings), pg)


def checked(services: Services, given: Iterable[str]) -> Preflight:
    """look_at, then AddressRefused for the first address the lab will not run against."""
    found = look_at(services, given)
    found.check()
    return found


class Gate:
    """start_services' `check`: looks at the addresses given, refuses the first the lab cannot measure through
    (AddressRefused), and keeps what it found for the command (`found`).

    `ahead(external)` looks before the command loads anything else (every backend's library takes seconds to
    import), so a refused address ends the command at once; start_services' call then finds the same addresses
    already looked at and looks no more."""

    def __init__(self) -> None:
        self.found = Preflight()
        self._looked: dict[str, str] | None = None  # service -> the address looked at ahead, as shown

    def ahead(self, external: ExternalAddresses) -> Preflight:
        """Look at the addresses given, from the flags and environment alone; AddressRefused for the first the
        lab cannot measure through."""
        self.look_only(external).check()
        return self.found

    def look_only(self, external: ExternalAddresses) -> Preflight:
        """ahead's look, without refusing (what the tests read)."""
        given = {name: address for name in SERVICE_NAMES if (address := external.given(name)) is not None}
        services = Services(**{KINDS[name].field: KINDS[name].parse(address) for name, address in given.items()})
        attach_pooler(services, external)
        self.found = look_at(services, given)
        self._looked = self._shown(services, given)
        return self.found

    @staticmethod
    def _shown(services: Services, given) -> dict[str, str]:
        shown = {name: KINDS[name].shown(services.address(name)) for name in given}
        if services.pg_pooler_url is not None:
            shown[postgres.POOLER] = redact(services.pg_pooler_url)
        return shown

    def __call__(self, services: Services, given: list[str]) -> None:
        if self._looked is None or self._shown(services, given) != self._looked:
            self.found, self._looked = checked(services, given), None
        pooler = self.found.of(postgres.POOLER)
        if pooler is not None and pooler.pool_mode is not None:  # the pooler scenario runs its column through it
            services.pg_pooler_mode = pooler.pool_mode.value
