"""Every lock service the lab knows, by name, in the order a run starts them: each declared in its own package."""

from __future__ import annotations

from lab.servers.etcd.service import EtcdService
from lab.servers.mariadb.service import MariaDBService
from lab.servers.postgres.service import PostgresService
from lab.servers.redis.service import RedisService, RedlockService
from lab.servers.service_kind import ServiceKind
from lab.servers.zookeeper.service import ZooKeeperService

KINDS: dict[str, ServiceKind] = {kind.name: kind for kind in (
    PostgresService(), RedisService(), EtcdService(), RedlockService(), ZooKeeperService(), MariaDBService())}
SERVICE_NAMES = tuple(KINDS)
ENV_VARS = {name: kind.env_var for name, kind in KINDS.items()}
# The operating-system package (.ci/os-packages) each service the lab starts from one comes from.
OS_PACKAGES = {name: kind.os_package for name, kind in KINDS.items() if kind.os_package}
