"""The registry of lock strategies: a new backend is one module plus one line here.

Modules are imported only when a backend is used, so a backend whose client
library is missing cannot break the others.
"""

from lab.registry import Registry

# name -> "module:Class". The order is the order of the report's rows.
REGISTRY = Registry("backend", {
    "none": "backends.none:NoLock",
    "session": "backends.session:SessionLock",
    "session_commit": "backends.session_commit:SessionLockCommitted",
    "session_autocommit": "backends.session_autocommit:SessionLockAutocommit",
    "xact": "backends.xact:TransactionLock",
    "serializable": "backends.serializable:SerializableRetry",
    "lease_row": "backends.lease_row:LeaseRow",
    "redis": "backends.redis_lock:RedisLock",
    "redis_fenced": "backends.redis_fenced:RedisFencedLock",
    "etcd": "backends.etcd_lock:EtcdLock",
    "etcd_fenced": "backends.etcd_fenced:EtcdFencedLock",
    "redlock": "backends.redlock:RedlockLock",
})

names = REGISTRY.names
load = REGISTRY.load
resolve = REGISTRY.resolve


def prepare_storage(engine, backend_names) -> None:
    """Create, in the lab's schema, what the chosen backends keep in PostgreSQL (fences, leases)."""
    from sqlalchemy import text

    statements = []
    for name in backend_names:
        statements += [s for s in load(name).ddl if s not in statements]
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement))
