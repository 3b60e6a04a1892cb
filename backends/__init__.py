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
})

names = REGISTRY.names
load = REGISTRY.load
resolve = REGISTRY.resolve
