"""What a backend may declare about itself, one member each: scenarios and faults select on these alone.

A capability is a str enum, so meta.json keeps its plain value and a run recorded before a member
existed still reads. Every backend attribute a scenario selects on is declared here, with its promise
as the member's docstring; a scenario never probes a backend's attributes to decide what applies.
"""

from __future__ import annotations

from lab.declarations.described_enum import DescribedStrEnum


class Capability(DescribedStrEnum):
    """One promise a backend makes; `Capability.X.__doc__` says what it promises."""

    SESSION_LOCK = ("session_lock",
                    "holds a session lock for the whole run, on its own connection, ending with that session: a "
                    "PostgreSQL session advisory lock, or MariaDB's GET_LOCK where its lock_service is mariadb")
    IN_TRANSACTION = ("in_transaction",
                      "takes its lock inside the write transaction, so lock and writes end together")
    FENCING = ("fencing", "the storage checks a token in the write transaction and refuses a lapsed holder")
    CONNECTION_HELD = ("connection_held",
                       "holds the right for the whole run on a live connection to its lock server, with no TTL: "
                       "it ends when that connection does (portalocker's Redis subscription)")
    LEASE_EXPIRY = ("lease_expiry", "the right is a lease with a TTL that lapses unless renewed")
    EXCLUSION = ("exclusion", "promises that two runs never rebuild the same company at once")
    SERIALIZABLE = ("serializable",
                    "no lock: SERIALIZABLE aborts one of two conflicting rebuilds and the run retries it")
    REPLICA_ACK = ("replica_ack",
                   "with option wait_replicas=N, takes a grant only once N replicas have it (Redis WAIT)")
    BATCH_REBUILD = ("batch_rebuild",
                     "rebuild_batch(): writes several companies in one transaction (the giant-transaction shape)")
    PARENT_ROW_LOCK = ("parent_row_lock",
                       "locks the company's parent row (its row_lock_strength, in its parent_table) to write")
    QUEUE = ("queue", "rebuild_next(): hands out whichever company is next and not done, one worker each")
    GUARD_OFF_ON_ROLE = ("guard_off_on_role",
                         "with option guard_off_on=role, turns the idle guard off on a role instead of its session")
    UNIQUE_MARKER = ("unique_marker",
                     "keeps a unique marker row per company (its marker_table): a second writer's insert fails")
    NATURAL_KEY = ("natural_key",
                   "upserts on a natural key (its natural_key columns), so the same inputs write the same rows")


def describe() -> dict[str, str]:
    """value -> promise, for `lab list` and the README's table."""
    return {member.value: member.__doc__ or "" for member in Capability}
