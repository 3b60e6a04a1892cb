"""What the adapters of a library's Redis lease with no fencing token declare alike: the lock and its services.

A key with a TTL on the run's Redis (lease expiry), one holder at a time (exclusion), nothing that fences a
stale holder's writes, which go to PostgreSQL. Each adapter declares only what is its own: its name, summary,
library and whether the lab's keep-alive renews it.
"""

from __future__ import annotations

from backends._lease import LeaseBackend
from lab.declarations.capabilities import Capability


class UnfencedRedisLease(LeaseBackend):
    """Base of the adapters whose library holds an expiring key on Redis and hands out no fencing token."""

    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.EXCLUSION})
    services = ("postgres", "redis")
