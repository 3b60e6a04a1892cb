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
from typing import Iterable, TypeVar
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import text
from sqlalchemy.engine import URL, make_url

from lab.errors import ServiceError
from lab.servers.clients import (
    etcd_client,
    first_line,
    is_sentinel_url,
    parse_mariadb_url,
    parse_pg_dsn,
    parse_sentinel_url,
    pg_engine,
    pg_hosts,
    redact,
    redact_text,
    redis_client,
)
from lab.servers.etcd.server import EmbeddedEtcd
from lab.servers.postgres.server import EmbeddedPostgres, traversable_by_others
from lab.servers.redis.server import EmbeddedRedis, EmbeddedRedlockMasters
from lab.servers.mariadb import server as mariadb
from lab.servers.zookeeper import server as zookeeper
from lab.servers.mariadb.sql import version as mariadb_version
from lab.servers.owner import OWNER_FILE, mark_owner, owner_alive

SERVICE_NAMES = ("postgres", "redis", "etcd", "redlock", "zookeeper", "mariadb")
ENV_VARS = {"postgres": "LAB_PG_DSN", "redis": "LAB_REDIS_URL", "etcd": "LAB_ETCD_ENDPOINT",
            "redlock": "LAB_REDLOCK_URLS", "zookeeper": "LAB_ZK_HOSTS", "mariadb": "LAB_MARIADB_URL"}
CONNECT_TIMEOUT = 5
# The operating-system package (.ci/os-packages) each service the lab starts from one comes from.
OS_PACKAGES = {"zookeeper": "zookeeper", "mariadb": "mariadb-server"}
_T = TypeVar("_T")


@dataclass
class ExternalAddresses:
    """Addresses of servers the lab did not start, from flags or environment."""

    pg_dsn: str | None = None
    redis_url: str | None = None
    etcd_endpoint: str | None = None
    redlock_urls: str | None = None  # comma-separated Redis URLs, one per Redlock master
    zk_hosts: str | None = None  # a ZooKeeper connect string: host:port[,host:port...][/chroot]
    mariadb_url: str | None = None  # a MariaDB URL: mysql://user:password@host:port/

    @classmethod
    def from_flags_and_env(cls, pg_dsn=None, redis_url=None, etcd_endpoint=None,
                           redlock_urls=None, zk_hosts=None, mariadb_url=None) -> "ExternalAddresses":
        return cls(pg_dsn or os.environ.get(ENV_VARS["postgres"]) or None,
                   redis_url or os.environ.get(ENV_VARS["redis"]) or None,
                   etcd_endpoint or os.environ.get(ENV_VARS["etcd"]) or None,
                   redlock_urls or os.environ.get(ENV_VARS["redlock"]) or None,
                   zk_hosts or os.environ.get(ENV_VARS["zookeeper"]) or None,
                   mariadb_url or os.environ.get(ENV_VARS["mariadb"]) or None)

    def given(self, service: str) -> str | None:
        return {"postgres": self.pg_dsn, "redis": self.redis_url, "etcd": self.etcd_endpoint,
                "redlock": self.redlock_urls, "zookeeper": self.zk_hosts, "mariadb": self.mariadb_url}[service]


@dataclass
class Services:
    """Live addresses of the servers a run uses, and the handles to stop what the lab started."""

    pg_url: URL | None = None
    redis_url: str | None = None
    etcd_endpoint: str | None = None
    redlock_urls: list[str] | None = None
    zk_hosts: str | None = None  # the ZooKeeper connect string kazoo takes
    mariadb_url: URL | None = None  # SQLAlchemy's MariaDB dialect on PyMySQL
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
        return _needed(self.pg_url, "postgres")

    def redis(self) -> str:
        return _needed(self.redis_url, "redis")

    def etcd(self) -> str:
        return _needed(self.etcd_endpoint, "etcd")

    def redlock(self) -> list[str]:
        return _needed(self.redlock_urls, "redlock")

    def zookeeper(self) -> str:
        if self.zk_hosts is None and "zookeeper" in self.unavailable:
            raise ServiceError(self.unavailable["zookeeper"])
        return _needed(self.zk_hosts, "zookeeper")

    def mariadb(self) -> URL:
        if self.mariadb_url is None and "mariadb" in self.unavailable:
            raise ServiceError(self.unavailable["mariadb"])
        return _needed(self.mariadb_url, "mariadb")

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
        if service == "postgres":
            return pg_hosts(self.pg())
        if service == "redis" and is_sentinel_url(self.redis()):  # the Sentinels: where a client asks first
            return list(parse_sentinel_url(self.redis()).sentinels)
        if service in ("redis", "redlock"):
            urls = [self.redis()] if service == "redis" else self.redlock()
            return [(urlsplit(u).hostname, urlsplit(u).port or 6379) for u in urls]
        if service == "zookeeper":
            return list(zookeeper.parse_hosts(self.zookeeper()))
        if service == "mariadb":
            return [(self.mariadb().host, self.mariadb().port or 3306)]
        host, _, port = self.etcd().removeprefix("http://").rpartition(":")
        return [(host or "127.0.0.1", int(port or 2379))]

    def routed(self, service: str, ports: list[int]) -> "Services":
        """These addresses with one service's servers reached through 127.0.0.1:ports (a proxy each).

        User, password, database and options are kept: a proxy must not drop credentials.
        The copy owns no server, so stopping it stops nothing.
        """
        if service == "postgres":
            return replace(self, pg_url=self.pg().set(host="127.0.0.1", port=ports[0]), embedded={}, tmp=None)
        if service == "redis":
            if is_sentinel_url(self.redis()):
                raise ServiceError("a client of a Redis behind Sentinel connects wherever the Sentinels say the "
                                   "primary is: a proxy cannot be put in its path")
            return replace(self, redis_url=_via(self.redis(), ports[0]), embedded={}, tmp=None)
        if service == "redlock":
            return replace(self, redlock_urls=[_via(u, p) for u, p in zip(self.redlock(), ports)],
                           embedded={}, tmp=None)
        if service == "zookeeper":  # every server of the connect string through its proxy, the chroot kept
            hosts = ",".join(f"127.0.0.1:{p}" for p in ports) + zookeeper.chroot(self.zookeeper())
            return replace(self, zk_hosts=hosts, embedded={}, tmp=None)
        if service == "mariadb":
            return replace(self, mariadb_url=self.mariadb().set(host="127.0.0.1", port=ports[0]), embedded={}, tmp=None)
        return replace(self, etcd_endpoint=f"127.0.0.1:{ports[0]}", embedded={}, tmp=None)

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
        if self.pg_url is not None:
            out["postgres"] = {"address": redact(self.pg_url), "embedded": self.is_embedded("postgres")}
        if self.redis_url is not None:
            out["redis"] = {"address": redact(self.redis_url), "embedded": self.is_embedded("redis")}
        if self.etcd_endpoint is not None:
            out["etcd"] = {"address": self.etcd_endpoint, "embedded": self.is_embedded("etcd")}
        if self.redlock_urls is not None:
            out["redlock"] = {"address": ", ".join(redact(u) for u in self.redlock_urls),
                              "embedded": self.is_embedded("redlock")}
        if self.zk_hosts is not None:
            out["zookeeper"] = {"address": self.zk_hosts, "embedded": self.is_embedded("zookeeper")}
        if self.mariadb_url is not None:
            out["mariadb"] = {"address": redact(self.mariadb_url), "embedded": self.is_embedded("mariadb")}
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


def _needed(address: _T | None, service: str) -> _T:
    if address is None:
        raise ServiceError(f"{service} is not among this run's servers")
    return address


def _via(url: str, port: int) -> str:
    """A Redis URL pointed at 127.0.0.1:port, with its user, password, database and query kept."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (userinfo + "@" if userinfo else "") + f"127.0.0.1:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def start_services(needed: Iterable[str], external: ExternalAddresses | None = None) -> Services:
    """Check the external servers given and start the embedded ones still needed.

    On any failure everything already started is stopped before the error propagates.
    """
    external = external or ExternalAddresses()
    needed = [name for name in SERVICE_NAMES if name in set(needed)]
    services = Services()
    try:
        # External addresses first: a wrong one fails in seconds, before any server starts.
        for name in needed:
            if (address := external.given(name)) is not None:
                _attach_external(services, name, address)
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


def not_installed(service: str) -> str | None:
    """Why the lab cannot start its own server of this service on this machine (its OS package is
    missing: only ZooKeeper and MariaDB come from one), or None."""
    return {"zookeeper": zookeeper.missing, "mariadb": mariadb.missing}.get(service, lambda: None)()


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
    server = {"postgres": EmbeddedPostgres, "redis": EmbeddedRedis, "etcd": EmbeddedEtcd,
              "redlock": EmbeddedRedlockMasters, "zookeeper": zookeeper.EmbeddedZooKeeper,
              "mariadb": mariadb.EmbeddedMariaDB}[name](services.tmp)
    services.embedded[name] = server
    server.start()
    if name == "postgres":
        services.pg_url = parse_pg_dsn(server.dsn)
    elif name == "redis":
        services.redis_url = server.url
    elif name == "redlock":
        services.redlock_urls = server.urls
    elif name == "zookeeper":
        services.zk_hosts = server.hosts
    elif name == "mariadb":
        services.mariadb_url = parse_mariadb_url(server.url)
    else:
        services.etcd_endpoint = server.endpoint
    services.versions[name] = _version(services, name)


def _attach_external(services: Services, name: str, address: str) -> None:
    if name == "postgres":
        services.pg_url = parse_pg_dsn(address)
    elif name == "redis":
        services.redis_url = _redis_url(address)
    elif name == "redlock":
        services.redlock_urls = [_redis_url(u.strip()) for u in address.split(",") if u.strip()]
    elif name == "zookeeper":
        services.zk_hosts = address
    elif name == "mariadb":
        services.mariadb_url = parse_mariadb_url(address)
    else:
        services.etcd_endpoint = address
    services.versions[name] = _version(services, name)


def _redis_url(address: str) -> str:
    if is_sentinel_url(address):
        parse_sentinel_url(address)  # a malformed one fails here, in one line
        return address
    if not address.startswith(("redis://", "rediss://", "unix://")):
        raise ServiceError(f"Redis URL must start with redis:// (or redis+sentinel://), got {redact_text(address)}")
    return address


def _redis_version(url: str) -> str:
    client = redis_client(url, socket_timeout=CONNECT_TIMEOUT)
    try:
        return client.info("server")["redis_version"]
    finally:
        client.close()


def _version(services: Services, name: str) -> str:
    """Connect once and read the server's version: the reachability check for every service."""
    try:
        if name == "postgres":
            engine = pg_engine(services.pg(), poolclass=None)
            try:
                with engine.connect() as conn:
                    return conn.execute(text("show server_version")).scalar_one()
            finally:
                engine.dispose()
        if name == "redis":
            return _redis_version(services.redis())
        if name == "redlock":
            return ", ".join(sorted({_redis_version(url) for url in services.redlock()}))
        if name == "zookeeper":  # every server of the connect string must answer
            return ", ".join(sorted({zookeeper.version(h, p) for h, p in zookeeper.parse_hosts(services.zookeeper())}))
        if name == "mariadb":
            return mariadb_version(services.mariadb())
        client = etcd_client(services.etcd(), timeout=CONNECT_TIMEOUT)
        try:
            return client.status().version
        finally:
            client.close()
    except ServiceError:
        raise
    except Exception as exc:
        where = {"postgres": lambda: redact(services.pg()), "redis": lambda: redact(services.redis()),
                 "etcd": lambda: services.etcd(), "zookeeper": lambda: services.zookeeper(),
                 "mariadb": lambda: redact(services.mariadb()),
                 "redlock": lambda: ", ".join(map(redact, services.redlock()))}[name]()
        raise ServiceError(f"{name} at {where} is unreachable: {first_line(exc)}") from None


