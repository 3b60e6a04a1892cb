"""Backends that break one promise on purpose, for tests that must see the lab catch it.

They live in a module of their own so a holder process can load them by entry
("tests.server.planted_backends:Class") without importing a test module.
"""

from backends.session_autocommit import SessionLockAutocommit


class IgnoresTheRoute(SessionLockAutocommit):
    """Opens its lock connection to the server directly, whatever address the lab routes it to."""

    name = "planted_ignores_route"

    def __init__(self, ctx, key):
        ctx.routed = None
        super().__init__(ctx, key)


class DeclaredUnroutable(SessionLockAutocommit):
    """Says, by declaration, that no proxy can carry its lock connection."""

    name = "planted_unroutable"
    lock_routable = False
