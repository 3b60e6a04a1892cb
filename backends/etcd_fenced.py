"""etcd's lock with the lock key's revision as the fencing token, checked by PostgreSQL."""

from __future__ import annotations

from backends.etcd_lock import EtcdLock
from lab.declarations.capabilities import Capability


class EtcdFencedLock(EtcdLock):
    """The revision etcd assigned to our lock key is higher than any earlier holder's."""

    name = "etcd_fenced"
    summary = "etcd lock + the key's revision as fencing token, checked by PostgreSQL inside the write"
    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.FENCING, Capability.EXCLUSION})
