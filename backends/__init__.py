"""The registry of lock strategies: a new backend is one module plus one line here, or a plugin.

Modules are imported only when a backend is used, so a backend whose client library is missing
cannot break the others. Plugins come from the entry-point group `locklab.backends`
(name = "module:Class") or from `lab run --backend-module module:Class`; one that does not
import or lacks part of the interface is reported by name with the reason and skipped.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib import metadata
from pathlib import Path

from lab.errors import LabError
from lab.declarations.registry import Registry

ENTRY_POINT_GROUP = "locklab.backends"

# name -> "module:Class". The order is the order of the report's rows.
BUILTIN = {
    "none": "backends.none:NoLock",
    "session": "backends.session:SessionLock",
    "session_commit": "backends.session_commit:SessionLockCommitted",
    "session_autocommit": "backends.session_autocommit:SessionLockAutocommit",
    "session_guard_off": "backends.session_guard_off:SessionLockGuardOff",
    "session_on_writes": "backends.session_on_writes:SessionLockOnWrites",
    "xact": "backends.xact:TransactionLock",
    "serializable": "backends.serializable:SerializableRetry",
    "row_lock": "backends.row_lock:RowLock",
    "row_lock_no_key": "backends.row_lock_no_key:RowLockNoKey",
    "unique_backstop": "backends.unique_backstop:UniqueBackstop",
    "idempotent": "backends.idempotent:IdempotentUpsert",
    "queue": "backends.queue:JobQueue",
    "lease_row": "backends.lease_row:LeaseRow",
    "redis": "backends.redis_lock:RedisLock",
    "redis_fenced": "backends.redis_fenced:RedisFencedLock",
    "etcd": "backends.etcd_lock:EtcdLock",
    "etcd_fenced": "backends.etcd_fenced:EtcdFencedLock",
    "redlock": "backends.redlock:RedlockLock",
    # MariaDB's GET_LOCK in the post's three connection modes, and a row lock inside the write, on Debian's
    # mariadb-server (.ci/os-packages): without it every cell says *does not run* with the install line.
    "mariadb_session": "backends.mariadb_session:MariaDBSessionLockDefault",
    "mariadb_session_commit": "backends.mariadb_session_commit:MariaDBSessionLockCommitted",
    "mariadb_session_autocommit": "backends.mariadb_session_autocommit:MariaDBSessionLockAutocommit",
    "mariadb_row_lock": "backends.mariadb_row_lock:MariaDBRowLock",
}

# Adapters for lock libraries (pip install 'locklab[libraries]'): name -> (entry, modules it needs);
# listed only when those modules are installed.
ADAPTERS = {
    "python_redis_lock": ("backends.adapters.python_redis_lock:PythonRedisLock", "redis_lock"),
    "python_redis_lock_renew": ("backends.adapters.python_redis_lock:PythonRedisLockRenewed", "redis_lock"),
    "tooz_pgsql": ("backends.adapters.tooz_pgsql:ToozPostgresLock", "tooz"),
    "tooz_redis": ("backends.adapters.tooz_redis:ToozRedisLock", "tooz"),
    "tooz_etcd": ("backends.adapters.tooz_etcd:ToozEtcdLock", "tooz", "etcd3gw"),
    "sherlock_redis": ("backends.adapters.sherlock:SherlockRedisLock", "sherlock"),
    "sherlock_etcd": ("backends.adapters.sherlock:SherlockEtcdLock", "sherlock", "etcd"),
    "redis_asyncio": ("backends.adapters.redis_asyncio_lock:RedisAsyncioLock", "redis.asyncio"),
    "portalocker_redis": ("backends.adapters.portalocker_redis:PortalockerRedisLock", "portalocker"),
    "kazoo": ("backends.adapters.kazoo_lock:KazooLock", "kazoo"),
    # The lab's own fenced lock on ZooKeeper, on kazoo's Lock: listed, like the adapters, once kazoo is installed.
    "zookeeper_fenced": ("backends.zookeeper_fenced:ZooKeeperFencedLock", "kazoo"),
    "pglock_session": ("backends.adapters.pglock:PglockSession", "pglock", "django"),
    "pglock_xact": ("backends.adapters.pglock:PglockXact", "pglock", "django"),
    "celery_once": ("backends.adapters.celery_once:CeleryOnceRedis", "celery_once"),
    "redbeat": ("backends.adapters.redbeat:RedBeatLock", "redbeat"),
    "procrastinate": ("backends.adapters.procrastinate_lock:ProcrastinateJobLock", "procrastinate"),
    "aioredlock": ("backends.adapters.aioredlock_lock:AioredlockLock", "aioredlock"),
    # Holder programs in other languages (backends/external.py): always listed; without their runtime or
    # packages every cell says *does not run* with the install line.
    "node_redlock": ("backends.node.node_redlock:NodeRedlock",),
    "node_pg_session": ("backends.node.node_pg_session:NodePgSession",),
}

broken: dict[str, str] = {}  # plugin name -> why it was skipped


def _discover() -> dict[str, str]:
    entries = dict(BUILTIN)
    entries.update({name: target for name, (target, *needs) in ADAPTERS.items()
                    if all(importlib.util.find_spec(module) is not None for module in needs)})
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in entries:
            entries[ep.name] = ep.value
    return entries


REGISTRY = Registry("backend", _discover())


def rank(name: str) -> tuple:
    """Sort key for reports: built-ins in registry order, then any other backend by name.

    It depends on the name alone, so a saved run renders the same whether or not the
    adapters and plugins it used are installed where the report is made.
    """
    order = list(BUILTIN)
    return (order.index(name), "") if name in order else (len(order), name)


def _problem(name: str) -> str | None:
    """Why a registered backend cannot be used (import error, not a Backend, missing methods), or None."""
    from backends.base import Backend

    try:
        cls = REGISTRY.load(name)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        return f"{REGISTRY.entries[name]} is not a backends.base.Backend"
    if cls.__abstractmethods__:  # acquire, rebuild, held, release are abstract on Backend
        return f"missing {', '.join(sorted(cls.__abstractmethods__))}"
    if getattr(cls, "name", None) != name:
        return f"its class says name = {getattr(cls, 'name', None)!r}, registered as {name!r}"
    return None


def post_roles() -> dict[str, str]:
    """Each built-in backend that declares one of the post's roles (lab/declarations/post_role.py), by name: what `lab report`
    installs for runs recorded before meta.json kept the roles (the report never imports a backend)."""
    return {name: str(role) for name in BUILTIN if (role := load(name).post_role) is not None}


def playing(role) -> str:
    """The built-in backend that declares this role of the post's (lab/declarations/post_role.py): an experiment's baseline
    is the post's method, found by its declaration."""
    found = [name for name, declared in post_roles().items() if declared == role]
    if len(found) != 1:
        raise LookupError(f"{len(found)} built-in backends declare the post's role {role}: {found}")
    return found[0]


def names() -> list[str]:
    """Every usable backend; unusable plugins are moved to `broken` with their reason."""
    usable = []
    for name in REGISTRY.names():
        if name in broken:
            continue
        reason = None if name in BUILTIN else _problem(name)
        if reason is None:
            usable.append(name)
        else:
            broken[name] = reason
    return usable


def add_module(spec: str) -> str:
    """Register `module:Class` from the command line; returns its name. The current folder is importable."""
    module, _, class_name = spec.partition(":")
    if not module or not class_name:
        raise LabError(f"--backend-module wants module:Class, got {spec!r}")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        cls = getattr(importlib.import_module(module), class_name)
        name = cls.name
    except Exception as exc:
        raise LabError(f"--backend-module {spec}: {type(exc).__name__}: {exc}") from None
    REGISTRY.entries[name] = spec
    reason = _problem(name)
    if reason is not None:
        del REGISTRY.entries[name]
        raise LabError(f"--backend-module {spec}: {reason}")
    return name


def entry(name: str) -> str:
    """The "module:Class" a backend was registered with (a holder process loads it from this)."""
    return REGISTRY.entries[name]


def load(name: str):
    return REGISTRY.load(name)


def resolve(spec: str) -> list[str]:
    """'all' or names -> usable backends; a named broken plugin is a one-line error."""
    usable = names()
    for wanted in (w.strip() for w in spec.split(",")):
        if wanted in broken:
            raise LabError(f"backend {wanted!r} is a broken plugin: {broken[wanted]}")
    return [n for n in REGISTRY.resolve(spec) if n in usable]


def prepare_storage(engine, backend_names) -> None:
    """Create, in the lab's schema on the engine's server, what the chosen backends that write there keep in it
    (fences, leases, parent rows): PostgreSQL's for most, MariaDB's for a backend whose rows live there."""
    from sqlalchemy import text

    from lab.servers.sessions import service_of

    statements = []
    for name in backend_names:
        if load(name).writes_to == service_of(engine):
            statements += [s for s in load(name).ddl if s not in statements]
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement))
