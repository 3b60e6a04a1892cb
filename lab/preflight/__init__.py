"""The preflight: what sits at every address the lab is given, read in a second or two before anything runs.

For each address (`--pg-dsn`, `--redis-url`, `--etcd-endpoint`, `--redlock-urls`, `--zk-hosts`, `--mariadb-url`) it
finds the server itself, a pooler and its mode, a standby in recovery, a read-only default or a replica, the guards
set per database and per role, the connections the lab's role may open, and whether that role may create the lab's
schema (findings.py: `Sits`, `Finding`, `Refusal`). Where the lab cannot measure what it names through an address,
the command ends with one line that says what to give instead (`AddressRefused`, exit 2). Shared by `lab run`,
`lab check-backend`, `lab replay` and `lab doctor`.

Modules: findings (the typed result), look (every address, in order), pooler (two clients: transaction pooling),
postgres, redis (Redis and Redlock's masters), etcd, zookeeper, mariadb (one look each).
"""

from lab.preflight.findings import AddressRefused, Finding, Problem, Refusal, Sits
from lab.preflight.look import Gate, Preflight, checked, look_at

__all__ = ["AddressRefused", "Finding", "Gate", "Preflight", "Problem", "Refusal", "Sits", "checked", "look_at"]
