"""kazoo's Lock with the lock node's creation zxid (czxid) as the fencing token, checked by PostgreSQL.

ZooKeeper orders every change it makes with one zxid, so a node created later has a higher czxid: the
holder after a lapsed one made its node after the lapsed one's, and its token is higher. Reading it
takes one more round trip after the grant (exists() on the lock's own node); the write then moves the
fence to it inside its transaction (backends/_fence.py), as etcd_fenced does with its key's revision.
"""

from __future__ import annotations

from kazoo.client import KazooClient

from backends._kazoo import KazooLease
from lab.declarations.capabilities import Capability


class ZooKeeperFencedLock(KazooLease):
    name = "zookeeper_fenced"
    summary = "kazoo Lock + the lock node's czxid as fencing token, checked by PostgreSQL inside the write"
    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.FENCING, Capability.EXCLUSION})
    bare_words = "kazoo Lock.acquire(blocking=False); exists(its node).czxid; Lock.release()"

    def _try_acquire(self) -> int | None:
        if super()._try_acquire() is None:
            return None
        stat = self.client.exists(self._node())
        if stat is None:  # gone between the grant and the read: not a grant this run can write under
            self.lock.release()
            return None
        return int(stat.czxid)

    def _bare_acquire(self, client: KazooClient, lock) -> object:
        """The same two calls on the bare call's own client: the grant, then its node's czxid."""
        if not lock.acquire(blocking=False):
            return False
        return client.exists(f"{lock.path}/{lock.node}").czxid
