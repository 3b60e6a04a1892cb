"""OpenStack tooz's etcd lock (the etcd3gw driver, over etcd's gRPC gateway), as tooz documents it.

A coordinator with its heartbeat started, get_lock, acquire. The lock is a key put on a lease;
the heartbeat refreshes that lease but ignores what etcd answers, so a lease that already
expired is "refreshed" without a word to the caller. The lab reads ownership through the
driver's own client and changes nothing in how tooz locks.
"""

from __future__ import annotations

import base64
import secrets

from tooz import coordination

from backends._lease import LeaseBackend


class ToozEtcdLock(LeaseBackend):
    name = "tooz_etcd"
    summary = "OpenStack tooz etcd3gw lock (coordinator heartbeat refreshes its lease); no fencing"
    capabilities = frozenset({"lease_expiry", "exclusion"})
    services = ("postgres", "etcd")
    renews = False  # tooz's own heartbeat refreshes held locks

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        endpoint = ctx.options.get("lock_etcd_endpoint") or ctx.services.etcd_endpoint
        ttl = max(1, int(-(-self.ttl // 1)))  # etcd leases count whole seconds
        url = f"etcd3+http://{endpoint}?timeout={ttl}&lock_timeout={ttl}&membership_timeout={ttl}"
        self.coordinator = coordination.get_coordinator(url, secrets.token_hex(8).encode())
        self.coordinator.start(start_heart=True)
        self.lock = self.coordinator.get_lock(f"locklab:{key}".encode())

    def _try_acquire(self) -> int | None:
        return 0 if self.lock.acquire(blocking=False) else None

    def _renew(self) -> bool:
        return False

    def _owned(self) -> bool:
        # The value tooz put is its lock's uuid; read through the driver's client, never written.
        values = self.coordinator.client.get(self.lock._key)
        return bool(values) and values[0] == base64.b64decode(self.lock._uuid)

    def _release(self) -> bool:
        return bool(self.lock.release())

    def abandon(self) -> None:
        # A killed process releases nothing: forget the held lock before stopping the coordinator,
        # whose stop() would otherwise release it on our behalf.
        self.coordinator._acquired_locks.clear()
        super().abandon()

    def close(self) -> None:
        super().close()
        if self.coordinator.is_started:  # close() may follow abandon(); tooz refuses a second stop
            self.coordinator.stop()
