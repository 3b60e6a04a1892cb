"""etcd's lock (a key bound to a lease) from etcd-sdk-python, kept alive while working, no fencing."""

from __future__ import annotations

from backends._lease import LeaseBackend
from backends.base import BareCall
from lab.declarations.capabilities import Capability
from lab.servers.clients import etcd_client


class EtcdLock(LeaseBackend):
    """The client library's lock with its lease refreshed from a thread every TTL/3."""

    name = "etcd"
    summary = "etcd lock (key on a lease) kept alive by refresh; no fencing"
    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.EXCLUSION})
    services = ("postgres", "etcd")

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        endpoint = ctx.lock_services.etcd_endpoint
        self.client = etcd_client(endpoint, timeout=self.ttl)
        # etcd leases count whole seconds; round up so the lease is never shorter than asked.
        self.lock = self.client.lock(f"locklab/{key}", ttl=max(1, int(-(-self.ttl // 1))))

    def _try_acquire(self) -> int | None:
        if not self.lock.acquire(timeout=0):
            return None
        # etcd may grant more than asked (its minimum is 1.5 election timeouts): keep time by the grant.
        self.ttl = float(self.lock.lease.ttl)
        return int(self.lock.revision)  # the revision of our put: increases with every grant

    def _renew(self) -> bool:
        responses = self.lock.refresh()
        return bool(responses) and responses[0].TTL > 0

    def _owned(self) -> bool:
        return self.lock.is_acquired()

    def _release(self) -> bool:
        return bool(self.lock.release())

    def bare_call(self, key: str) -> BareCall | None:
        """etcd-sdk-python's Lock on a client of its own: acquire(timeout=0) and release()."""
        client = etcd_client(self.ctx.lock_services.etcd(), timeout=self.ttl)
        lock = client.lock(f"locklab/{key}", ttl=self.lock.ttl)
        return BareCall("etcd-sdk-python Lock.acquire(timeout=0); Lock.release()", lambda: lock.acquire(timeout=0),
                        lock.release, client.close)

    def close(self) -> None:
        super().close()
        self.client.close()
