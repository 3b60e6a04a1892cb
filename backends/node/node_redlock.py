"""node-redlock 4 (npm's `redlock`, over `ioredis` 5) across the lab's Redlock masters, from a Node.js holder program.

What the library promises: Redlock's majority vote, a random value per lock, SET NX PX on each master
and Lua scripts that check the value to extend and release; one attempt per acquire here
(retryCount 0). It renews nothing itself (version 4 has no auto-extension): the lab's keep-alive sends
`renew` every TTL/3 and the program calls lock.extend(TTL), as a Node.js job would on a timer. No
fencing token. The program is redlock/holder.js; its packages install with
`npm ci --prefix backends/node/redlock`.
"""

from backends.node._holder import HERE, NodeHolder   # NodeHolder: command ("node", "holder.js"), Node.js
from lab.declarations.capabilities import Capability


class NodeRedlock(NodeHolder):
    name = "node_redlock"
    summary = "node-redlock 4 (Node.js, ioredis) over 3 Redis masters, extend() every TTL/3; no fencing"
    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.EXCLUSION})
    services = ("postgres", "redlock")
    library = "redlock"                             # its npm name: the library table shows it with its version
    folder = HERE / "redlock"                       # holder.js, package.json, package-lock.json
