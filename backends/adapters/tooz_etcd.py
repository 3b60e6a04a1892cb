"""OpenStack tooz's etcd lock (the etcd3gw driver, over etcd's gRPC gateway), as tooz documents it.

The lock is a key put on a lease; the coordinator's heartbeat refreshes that lease but ignores
what etcd answers, so a lease that already expired is "refreshed" without a word to the caller.
The lab reads ownership through the driver's own client and changes nothing in how tooz locks.
"""

from __future__ import annotations

import base64

from backends.adapters._tooz import ToozLease


class ToozEtcdLock(ToozLease):
    name = "tooz_etcd"
    summary = "OpenStack tooz etcd3gw lock (coordinator heartbeat refreshes its lease); no fencing"
    packages = ("etcd3gw",)
    services = ("postgres", "etcd")

    def _coordinator_url(self) -> str:
        endpoint = self.ctx.lock_services.etcd_endpoint
        ttl = max(1, int(-(-self.ttl // 1)))  # etcd leases count whole seconds
        return f"etcd3+http://{endpoint}?timeout={ttl}&lock_timeout={ttl}&membership_timeout={ttl}"

    def _owned(self) -> bool:
        # The value tooz put is its lock's uuid; read through the driver's client, never written.
        values = self.coordinator.client.get(self.lock._key)
        return bool(values) and values[0] == base64.b64decode(self.lock._uuid)
