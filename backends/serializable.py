"""No lock: each rebuild runs under SERIALIZABLE and is retried when PostgreSQL aborts it."""

import random
import time

from backends._writes import write_transaction
from backends.base import NoRunLock, Point, RebuildResult, no_point
from lab.declarations.capabilities import Capability
from lab.declarations.post_role import PostRole

SERIALIZATION_FAILURE = "40001"
DEADLOCK_DETECTED = "40P01"
RETRYABLE = {SERIALIZATION_FAILURE, DEADLOCK_DETECTED}


class SerializableRetry(NoRunLock):
    """The database, not a lock, decides: one of two conflicting rebuilds fails and is run again.

    Options: max_attempts (default 20; 1 counts failures without retrying), backoff_s
    (first backoff, doubled each attempt up to 0.5 s, with full jitter) and seed.
    """

    name = "serializable"
    post_role = PostRole.SERIALIZABLE
    summary = "no lock; SERIALIZABLE, retried on serialization failure (40001) with jittered backoff"
    capabilities = frozenset({Capability.SERIALIZABLE})

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self._random = random.Random(ctx.options.get("seed", key))

    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        max_attempts = self.ctx.options.get("max_attempts", 20)
        backoff = self.ctx.options.get("backoff_s", 0.01)
        failed = []
        for attempt in range(1, max_attempts + 1):
            result = write_transaction(self.ctx.writes, self.ctx.company_table, [company], rows, run_id, point=point,
                                       isolation="SERIALIZABLE")
            if result.sqlstate not in RETRYABLE or attempt == max_attempts:
                break
            failed.append(result.error)
            # Full jitter keeps two retrying runs from colliding again in lockstep.
            time.sleep(self._random.uniform(0, min(0.5, backoff * 2 ** (attempt - 1))))
        result.attempts, result.failed_attempts = attempt, failed
        return result
