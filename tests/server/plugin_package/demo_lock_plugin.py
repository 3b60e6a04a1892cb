"""A third-party lock strategy: a session advisory lock on AUTOCOMMIT, written against the plugin interface."""

from backends._session import SessionLockBackend
from backends.base import Backend


class DemoLock(SessionLockBackend):
    name = "demo_lock"
    summary = "demo plugin: session advisory lock on AUTOCOMMIT"
    autocommit = True


class Incomplete(Backend):
    """Declares itself but implements none of the interface: the lab must skip it with the reason."""

    name = "broken_methods"
    summary = "a plugin that forgot its methods"
