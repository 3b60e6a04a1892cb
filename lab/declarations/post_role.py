"""Which of the post's named methods a backend is: the post's tables and checks are about these, so the
scenarios and the report find their backend by this declaration, never by its name.

A str enum, so meta.json keeps its plain value and the report reads it without importing a backend.
"""

from __future__ import annotations

from lab.declarations.described_enum import DescribedStrEnum


class PostRole(DescribedStrEnum):
    """One method or alternative the post names; `PostRole.X.__doc__` says which."""

    NO_LOCK = ("no_lock", "the post's baseline: no lock at all, READ COMMITTED")
    METHOD_1 = ("method_1", "method 1: the session lock on a default (autobegin) connection")
    METHOD_2 = ("method_2", "method 2: the session lock, committing right after acquiring")
    METHOD_3 = ("method_3", "method 3: the session lock on an AUTOCOMMIT connection")
    METHOD_4 = ("method_4", "method 4: pg_advisory_xact_lock inside the write transaction")
    SERIALIZABLE = ("serializable", "Why not SERIALIZABLE: no lock, the conflict aborted and retried")
    GUARD_OFF = ("guard_off", "Why not turn the guard off: method 1 with idle_in_transaction_session_timeout 0")
    ON_WRITES = ("on_writes", "Why not the writes' connection: the session lock on the connection that writes")

    @property
    def method(self) -> int | None:
        """The post's method number (1-4), None for the baseline and the alternatives."""
        return int(self.value[-1]) if self.value.startswith("method_") else None
