"""The servers a run needs: embedded ones the lab starts and stops, or external ones it is given.

Embedded is the default. An external address comes from a flag or from the
environment (LAB_PG_DSN, LAB_REDIS_URL, LAB_ETCD_ENDPOINT, LAB_REDLOCK_URLS, LAB_ZK_HOSTS, LAB_MARIADB_URL). Only
the services the chosen backends need are started or checked. ZooKeeper and MariaDB are the embedded servers that
come from the operating system's packages: where one is not installed it is not started, and what
needs it says why (Services.unavailable) instead of failing the run.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

from sqlalchemy.engine import URL, make_url

from lab.errors import ServiceError
from lab.servers.clients import first_line, parse_pg_dsn
from lab.servers.owner import OWNER_FILE, mark_owner, owner_alive
from lab.servers.postgres.server import traversable_by_others
from lab.servers.service_kinds import ENV_VARS, KINDS, OS_PACKAGES, SERVICE_NAMES

CONNECT_TIMEOUT = 5
POOLER_ENV_VAR = "LAB_PG_POOLER_DSN"  # --pg-pooler-dsn's environment variable
__all__ = ["ENV_VARS", "OS_PACKAGES", "SERVICE_NAMES", "ExternalAddresses", "Services", "start_services"]


@dataclass
class ExternalAddresses:
    """Addresses of servers the lab did not start, from flags or environment."""

    pg_dsn: str | None = None
    redis_url: str | None = None
    etcd_endpoint: str | None = None
    redlock_urls: str | None = None  # comma-separated Redis URLs, one per Redlock master
    zk_hosts: str | None = None  # a ZooKeeper connect string: host:port[,host:port...][/chroot]
    mariadb_url: str | None = None  # a MariaDB URL: mysql://user:password@host:port/
    # A PostgreSQL pooler in front of pg_dsn's database (PgBouncer ...): not a lock service of its own, but where
    # the pooler scenario runs every lock (scenarios/pooler.py); pg_dsn stays the database's own address.
    pg_pooler_dsn: str | None = None

    @classmethod
    def from_flags_and_env(cls, flags: object = None) -> "ExternalAddresses":
        """Each service's address from its flag (the attribute of an argparse namespace named as its field here)
        or else from its environment variable; likewise the pooler's."""
        return cls(**{kind.flag: getattr(flags, kind.flag, None) or os.environ.get(kind.env_var) or None
                      for kind in KINDS.values()},
                   pg_pooler_dsn=getattr(flags, "pg_pooler_dsn", None) or os.environ.get(POOLER_ENV_VAR) or None)

    def given(self, service: str) -> str | None:
        return getattr(self, KINDS[service].flag)


@dataclass
class Services:
    """Live addresses of the servers a run uses, and the handles to stop what the lab started."""

    pg_url: URL | None = None
    redis_url: str | None = None
    etcd_endpoint: str | None = None
    redlock_urls: list[str] | None = None
    zk_hosts: str | None = None  # the ZooKeeper connect string kazoo takes
    mariadb_url: URL | None = None  # SQLAlchemy's MariaDB dialect on PyMySQL
    pg_pooler_url: URL | None = None  # the user's pooler in front of pg_url's database (--pg-pooler-dsn)
    pg_pooler_mode: str | None = None  # its pool mode as the preflight's two clients saw it (lab.stack.description.PoolMode)
    embedded: dict = field(default_factory=dict)  # service name -> Embedded* server
    versions: dict = field(default_factory=dict)
    tmp: Path | None = None
    # fault -> the user's own shell command that performs it on servers the lab did not start
    # (`--fault-command restart=CMD`); faults on embedded servers never use it.
    fault_commands: dict = field(default_factory=dict)
    swept: list = field(default_factory=list)  # temp dirs of dead lab processes removed at start
    # service -> why it was not started here (its OS package is missing): what needs it does not run
    unavailable: dict = field(default_factory=dict)

    def is_embedded(self, service: str) -> bool:
        return service in self.embedded

    # The address of a service the caller needs: code that runs only once the run has started (or been
    # given) that service reads it through these, and a service that is not there is a ServiceError
    # naming it, instead of a None passed on to a client.
    def pg(self) -> URL:
        return self.address("postgres")

    def redis(self) -> str:
        return self.address("redis")

    def etcd(self) -> str:
        return self.address("etcd")

    def redlock(self) -> list[str]:
        return self.address("redlock")

    def zookeeper(self) -> str:
        return self.address("zookeeper")

    def mariadb(self) -> URL:
        return self.address("mariadb")

    def address(self, service: str):
        """A service's address; one the run has not got is a ServiceError saying why (not among its servers, or
        its OS package is missing)."""
        address = getattr(self, KINDS[service].field)
        if address is None:
            raise ServiceError(self.unavailable.get(service) or f"{service} is not among this run's servers")
        return address

    def to_addresses(self) -> dict:
        """The addresses as plain data (passwords included: for a holder process's stdin, never a file)."""
        return {"pg_dsn": self.pg().render_as_string(hide_password=False), "redis_url": self.redis_url,
                "etcd_endpoint": self.etcd_endpoint, "redlock_urls": self.redlock_urls, "zk_hosts": self.zk_hosts,
                "mariadb_url": None if self.mariadb_url is None else self.mariadb_url.render_as_string(hide_password=False)}

    @classmethod
    def from_addresses(cls, addresses: dict) -> "Services":
        """The inverse of to_addresses (a Services that owns no server)."""
        return cls(pg_url=make_url(addresses["pg_dsn"]), redis_url=addresses["redis_url"],
                   etcd_endpoint=addresses["etcd_endpoint"], redlock_urls=addresses.get("redlock_urls"),
                   zk_hosts=addresses.get("zk_hosts"),
                   mariadb_url=make_url(addresses["mariadb_url"]) if addresses.get("mariadb_url") else None)

    def addresses(self, service: str) -> list[tuple[str | None, int]]:
        """(host, port) of every server of a service (three for Redlock); host None: a URL without one."""
        return KINDS[service].hosts(self.address(service))

    def routed(self, service: str, ports: list[int]) -> "Services":
        """These addresses with one service's servers reached through 127.0.0.1:ports (a proxy each).

        User, password, database and options are kept: a proxy must not drop credentials.
        The copy owns no server, so stopping it stops nothing.
        """
        kind = KINDS[service]
        return replace(self, **{kind.field: kind.routed(self.address(service), ports)}, embedded={}, tmp=None)

    @property
    def pg_log(self) -> Path | None:
        """The PostgreSQL server log, readable only when the lab runs the server."""
        server = self.embedded.get("postgres")
        return server.log_path if server else None

    @property
    def mariadb_log(self) -> Path | None:
        """The MariaDB server log (its error log), readable only when the lab runs the server."""
        server = self.embedded.get("mariadb")
        return server.log_path if server else None

    def describe(self) -> dict:
        """Where each service is, with passwords hidden, for meta.json and the console."""
        out = {}
        for name, kind in KINDS.items():
            if (address := getattr(self, kind.field)) is not None:
                out[name] = {"address": kind.shown(address), "embedded": self.is_embedded(name)}
        for name, version in self.versions.items():
            out[name]["version"] = version
        return out

    def restart(self, service: str) -> None:
        """Restart an embedded server in place (same port, same data)."""
        if service not in self.embedded:
            raise ServiceError(f"{service} is external: the lab restarts only servers it started")
        self.embedded[service].restart()

    def stop(self) -> None:
        """Stop every embedded server (last started first) and remove the temp dir; idempotent."""
        for name in reversed(list(self.embedded)):
            self.embedded[name].stop()
        self.embedded.clear()
        if self.tmp is not None:
            _remove_tree(self.tmp)
            self.tmp = None

    def __enter__(self) -> "Services":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


REMOVE_WITHIN_S = 10.0  # how long a temp dir's removal keeps at it while a stopping trial still writes into it


def _remove_tree(folder: Path) -> None:
    """Remove folder and all in it. The runner waits for the trials in flight after a Ctrl-C (lab/runner/trials.py),
    but one that outlives that wait may still create or remove its own files here while the walk runs, which
    leaves the folder behind (seen once, before that wait: an empty run dir after a stopped failover trial
    removed its own): so the removal is tried again until the folder is gone, for a while."""
    deadline = time.monotonic() + REMOVE_WITHIN_S
    while True:
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists() or time.monotonic() > deadline:
            return
        time.sleep(0.2)


def start_services(needed: Iterable[str], external: ExternalAddresses | None = None,
                   check: Callable[[Services, list[str]], object] | None = None) -> Services:
    """Check the external servers given and start the embedded ones still needed.

    check: called with the services and the names of those given by address, once those are attached and before any
    server of the lab's own starts (the preflight, lab/preflight/): its error ends the start there, in seconds.
    On any failure everything already started is stopped before the error propagates.
    """
    external = external or ExternalAddresses()
    needed = [name for name in SERVICE_NAMES if name in set(needed)]
    services = Services()
    try:
        # External addresses first: a wrong one fails in seconds, before any server starts.
        given = {name: address for name in needed if (address := external.given(name)) is not None}
        for name, address in given.items():
            _attach_external(services, name, address)
        attach_pooler(services, external)
        if check is not None and given:
            check(services, list(given))
        for name in needed:
            if external.given(name) is None:
                if (why := not_installed(name)) is not None:
                    services.unavailable[name] = why  # what needs it says "does not run", the run goes on
                    continue
                _start_embedded(services, name)
        return services
    except BaseException:
        services.stop()
        raise


def attach_pooler(services: Services, external: ExternalAddresses) -> None:
    """The user's pooler (--pg-pooler-dsn), parsed, beside the database's own address, which it needs."""
    if external.pg_pooler_dsn is None:
        return
    if external.pg_dsn is None:
        raise ServiceError("--pg-pooler-dsn names a pooler in front of your database: give the database's own address "
                           "with --pg-dsn too")
    services.pg_pooler_url = parse_pg_dsn(external.pg_pooler_dsn)


def not_installed(service: str) -> str | None:
    """Why the lab cannot start its own server of this service on this machine (its OS package is
    missing: only ZooKeeper and MariaDB come from one), or None."""
    return KINDS[service].missing()


def _temp_base() -> Path:
    """Where the embedded servers' temp dir goes.

    As root, PostgreSQL runs as an unprivileged user who must reach its data dir, so a
    private TMPDIR (mode 0700 somewhere up the path) falls back to /tmp.
    """
    base = Path(tempfile.gettempdir())
    if os.geteuid() != 0 or traversable_by_others(base):
        return base
    if traversable_by_others(Path("/tmp")):
        return Path("/tmp")
    raise ServiceError(f"the embedded PostgreSQL runs as an unprivileged user who cannot reach {base}; "
                       f"set TMPDIR to a directory every user can traverse")


def owned_temp_dir() -> Path:
    """A new temp dir every user can traverse, marked with this process as its owner: removed by the next lab
    run's sweep if this process dies without removing it (a SIGKILL)."""
    folder = Path(tempfile.mkdtemp(prefix="locklab-", dir=_temp_base()))
    folder.chmod(0o755)
    mark_owner(folder)
    return folder


def sweep_abandoned(base: Path) -> list[str]:
    """Remove the temp dirs of lab processes that are gone (a SIGKILL skips every cleanup; the servers
    die with the lab, their data does not). Only dirs with an owner file, whose owner is dead."""
    removed = []
    for folder in sorted(base.glob("locklab-*")):
        if (folder / OWNER_FILE).is_file() and not owner_alive(folder):
            size = _size(folder)
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(f"{folder} ({size / 2**20:.0f} MB)")
    return removed


def _size(folder: Path) -> int:
    """Bytes under folder, counting what is still there: another lab starting at the same moment may be removing
    the same abandoned folder."""
    total = 0
    for top, _, files in os.walk(folder):
        for name in files:
            try:
                found = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            total += found.st_size if stat.S_ISREG(found.st_mode) else 0
    return total


def _start_embedded(services: Services, name: str) -> None:
    if services.tmp is None:
        services.swept = sweep_abandoned(_temp_base())
        services.tmp = owned_temp_dir()
    kind = KINDS[name]
    server = kind.own_server(services.tmp)
    services.embedded[name] = server
    server.start()
    setattr(services, kind.field, kind.own_address(server))
    services.versions[name] = _version(services, name)


def _attach_external(services: Services, name: str, address: str) -> None:
    kind = KINDS[name]
    setattr(services, kind.field, kind.parse(address))
    services.versions[name] = _version(services, name)


def _version(services: Services, name: str) -> str:
    """Connect once and read the server's version: the reachability check for every service."""
    kind, address = KINDS[name], services.address(name)
    try:
        return kind.version(address, CONNECT_TIMEOUT)
    except ServiceError:
        raise
    except Exception as exc:
        raise ServiceError(f"{name} at {kind.shown(address)} is unreachable: {first_line(exc)}") from None
