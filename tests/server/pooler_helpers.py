"""The lab's own PgBouncer in front of the test session's embedded PostgreSQL, for the pooler tests."""

from __future__ import annotations

import pytest

from lab.servers.pgbouncer.server import PgBouncer

# Where pgbouncer is missing these tests skip, naming it and its install command (tests/os_packages.py);
# .ci/run installs it and sets LAB_REQUIRE_SYSTEM_SERVERS=1, so there a missing pgbouncer fails them instead.
needs_pgbouncer = pytest.mark.os_packages("pgbouncer")


def start_bouncer(services, mode: str, **kwargs) -> PgBouncer:
    """A started PgBouncer in pool mode `mode` (session / transaction) in front of the embedded server."""
    server = services.embedded["postgres"]
    return PgBouncer(services.tmp, services.pg_url, mode, os_user=server.user, **kwargs).start()
