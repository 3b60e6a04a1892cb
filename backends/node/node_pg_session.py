"""A PostgreSQL session advisory lock taken on node-postgres' default connection, from a Node.js holder program.

`new pg.Client(config)`, `connect()`, `pg_try_advisory_lock` and `pg_advisory_unlock` on that client,
as node-postgres' documentation queries. Whether its default connection leaves the session idle in
a transaction (the post's case A, as psycopg2's does) is what the `cases` scenario measures here.
The writes go through the lab's own sessions, as the post's job's do. The program is
pg_session/holder.js; its packages install with `npm ci --prefix backends/node/pg_session`.
"""

from backends.node._holder import HERE, NodeHolder
from lab.declarations.capabilities import Capability


class NodePgSession(NodeHolder):
    name = "node_pg_session"
    summary = "pg_try_advisory_lock on node-postgres' default connection (Node.js), a session lock held for the run"
    capabilities = frozenset({Capability.SESSION_LOCK, Capability.EXCLUSION})
    library = "pg"
    # node-postgres is no libpq: of the address's parameters the program applies sslmode (holder.js, protocol.js);
    # keepalive intervals and tcp_user_timeout it has no way to set.
    pg_parameters = frozenset({"sslmode"})
    folder = HERE / "pg_session"
