"""kazoo's Lock on ZooKeeper, as its documentation shows it: KazooClient(hosts).start(), client.Lock(path,
identifier), acquire(blocking=False), release(), and a connection state listener (backends/_kazoo.py).

No fencing: kazoo hands out no token and the resource checks none. Its lease is the ZooKeeper session:
the client's timeout asked for one TTL, pinged by kazoo's own thread, so nothing of the lab's renews it.
"""

from __future__ import annotations

from backends._kazoo import KazooLease


class KazooLock(KazooLease):
    name = "kazoo"
    summary = "kazoo Lock (an ephemeral sequential znode on a ZooKeeper session of one TTL); no fencing"
    library = "kazoo"
