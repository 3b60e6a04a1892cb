"""Method 1: a session advisory lock on a default connection (autobegin, never committed)."""

from backends._session import SessionLockBackend
from lab.declarations.post_role import PostRole


class SessionLock(SessionLockBackend):
    """The post's original code: the driver's autobegun transaction stays open all run long."""

    name = "session"
    summary = "session advisory lock on a default (autobegin) connection: the post's method 1"
    post_role = PostRole.METHOD_1
