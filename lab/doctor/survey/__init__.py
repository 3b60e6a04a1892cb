"""`lab doctor`'s survey: a stack description (lab/stack/description.py) from what the servers it is pointed at report, reading
only, plus what the user states (the lock in use, the driver), which no server can report.

Each part is read by a module of its own (PostgreSQL by lab/doctor/postgres.py, Patroni's REST API, Redis, etcd, ZooKeeper).
A part it is not pointed at is left out of the stack (None) and named in `not_described`; a fact it could not read
stays Unknown with the reason. A server that cannot be reached ends the survey with one line (ServiceError).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.doctor.postgres import NO_HA_READ, Examined, examine
from lab.errors import LabError
from lab.stack.description import LOCK_UNKNOWN, Client, Patroni, Stack, Unknown
from lab.doctor.survey.etcd import read_etcd
from lab.doctor.survey.patroni import read_patroni
from lab.doctor.survey.redis import read_redis, read_redlock
from lab.doctor.survey.zookeeper import read_zookeeper


@dataclass(frozen=True)
class Pointed:
    """What the doctor is pointed at (each optional) and what the user states."""

    dsn: str | None = None
    redis_url: str | None = None
    redlock_urls: tuple[str, ...] = ()
    etcd: str | None = None
    zk_hosts: str | None = None
    patroni_url: str | None = None
    lock: str | None = None  # a backend name; "none" for no lock
    driver: str | None = None
    autocommit: bool | None = None
    hung_after_s: float = 3600

    def anything(self) -> bool:
        return any((self.dsn, self.redis_url, self.redlock_urls, self.etcd, self.zk_hosts, self.patroni_url))


@dataclass(frozen=True)
class Survey:
    stack: Stack
    examined: Examined | None  # the PostgreSQL checks, when a DSN was given
    not_described: list[str] = field(default_factory=list)  # parts left out, with the flag that would read each


NO_LOCK = "none"


def survey(pointed: Pointed) -> Survey:
    if not pointed.anything():
        raise LabError("lab doctor needs at least one of --dsn, --redis-url, --redlock-urls, --etcd, --zk-hosts, "
                       "--patroni-url")
    if pointed.patroni_url and not pointed.dsn:
        raise LabError("--patroni-url describes PostgreSQL's HA manager: give the cluster's --dsn too")
    ha: Patroni | None | Unknown = read_patroni(pointed.patroni_url) if pointed.patroni_url else NO_HA_READ
    examined = examine(pointed.dsn, pointed.hung_after_s, ha) if pointed.dsn else None
    lock: str | None | Unknown = LOCK_UNKNOWN if pointed.lock is None else (
        None if pointed.lock == NO_LOCK else pointed.lock)
    given = Client()
    client = Client(driver=pointed.driver if pointed.driver is not None else given.driver,
                    autocommit=pointed.autocommit if pointed.autocommit is not None else given.autocommit)
    stack = Stack(postgres=examined.postgres if examined else None,
                  redis=read_redis(pointed.redis_url) if pointed.redis_url else None,
                  redlock=read_redlock(list(pointed.redlock_urls)) if pointed.redlock_urls else None,
                  etcd=read_etcd(pointed.etcd) if pointed.etcd else None,
                  zookeeper=read_zookeeper(pointed.zk_hosts) if pointed.zk_hosts else None,
                  client=client, lock=lock)
    flags = {"postgres": "--dsn", "redis": "--redis-url", "redlock": "--redlock-urls", "etcd": "--etcd",
             "zookeeper": "--zk-hosts"}
    missing = [f"{name} (no {flag} given)" for name, flag in flags.items() if name not in stack.services()]
    return Survey(stack, examined, missing)
